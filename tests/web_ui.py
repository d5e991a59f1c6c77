"""The chat page in a real browser (headless Chromium through chromedriver): type a
message, send it, see the streamed answer appear, press stop, and see the page keep
working. Usage: web_ui.py BASE_URL. Exits non-zero on failure."""
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

base = sys.argv[1]
opts = webdriver.ChromeOptions()
opts.binary_location = "/usr/bin/chromium"
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-dev-shm-usage", "--user-data-dir=" + tempfile.mkdtemp(prefix="llamars-chrome-")]:
    opts.add_argument(a)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    driver.get(base + "/")
    wait = WebDriverWait(driver, 30)
    wait.until(lambda d: "slots" in d.find_element(By.ID, "model").text)
    # A long answer: no stop token, many tokens, so that stop has something to stop.
    max_tokens = driver.find_element(By.ID, "max_tokens")
    max_tokens.clear()
    max_tokens.send_keys("2000")
    box = driver.find_element(By.ID, "input")
    box.send_keys("Tell me a story about a dog.")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.user"))
    assert driver.find_element(By.CSS_SELECTOR, ".msg.user").text == "Tell me a story about a dog."
    # The answer streams in: its text grows while the request runs.
    wait.until(lambda d: len(d.find_element(By.CSS_SELECTOR, ".msg.assistant").text) > 20)
    first = len(driver.find_element(By.CSS_SELECTOR, ".msg.assistant").text)
    wait.until(lambda d: len(d.find_element(By.CSS_SELECTOR, ".msg.assistant").text) > first)
    assert driver.find_element(By.CSS_SELECTOR, ".msg.assistant").get_attribute("data-streaming") == "1"
    stop = driver.find_element(By.ID, "stop")
    assert stop.is_enabled()
    stop.click()
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, ".msg.assistant").get_attribute("data-done") == "1")
    assert not driver.find_element(By.ID, "stop").is_enabled()
    assert driver.find_element(By.ID, "send").is_enabled()
    notes = driver.find_elements(By.CSS_SELECTOR, ".timings")
    assert notes and "stopped" in notes[-1].text, [n.text for n in notes]
    stopped_len = len(driver.find_element(By.CSS_SELECTOR, ".msg.assistant").text)
    time.sleep(0.5)
    assert len(driver.find_element(By.CSS_SELECTOR, ".msg.assistant").text) == stopped_len
    # A second, short answer finishes with its timings shown.
    max_tokens.clear()
    max_tokens.send_keys("8")
    box.send_keys("And a cat?")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2
               and d.find_elements(By.CSS_SELECTOR, ".msg.assistant")[1].get_attribute("data-done") == "1")
    notes = driver.find_elements(By.CSS_SELECTOR, ".timings")
    assert "8 tokens generated" in notes[-1].text, notes[-1].text
    driver.save_screenshot(tempfile.gettempdir() + "/llamars-webui.png")
    print("web ui: 1 passed, 0 failed")
finally:
    driver.quit()
