"""The chat page in a real browser (headless Chromium through chromedriver): type a
message, send it, see the streamed answer appear, press stop, and see the page keep
working; a turn the server refuses leaves the conversation; at phone width everything
stays on screen. Usage: web_ui.py BASE_URL [API_KEY]: with a key (a server started with
--api-key), the page first says it needs one, then loads the model's info once it is
typed. Exits non-zero on failure."""
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

base = sys.argv[1]
api_key = sys.argv[2] if len(sys.argv) > 2 else None
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
    if api_key:
        driver.execute_script("localStorage.removeItem('llama-api-key')")
        driver.get(base + "/")
        wait.until(lambda d: "API key needed" in d.find_element(By.ID, "model").text)
        key = driver.find_element(By.ID, "api_key")
        key.send_keys(api_key)
        key.send_keys("\t")  # leaving the field commits it (a change event)
    wait.until(lambda d: "slots" in d.find_element(By.ID, "model").text)
    # A turn the server refuses (top-p out of range) is not sent again with the next one.
    top_p = driver.find_element(By.ID, "top_p")
    top_p.clear()
    top_p.send_keys("5")
    driver.find_element(By.ID, "input").send_keys("This one fails.")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.error"))
    assert driver.execute_script("return history.length") == 0, driver.execute_script("return history")
    assert driver.find_elements(By.CSS_SELECTOR, ".msg.user.failed")
    top_p.clear()
    top_p.send_keys("0.95")
    # A long answer: no stop token, many tokens, so that stop has something to stop.
    max_tokens = driver.find_element(By.ID, "max_tokens")
    max_tokens.clear()
    max_tokens.send_keys("2000")
    box = driver.find_element(By.ID, "input")
    box.send_keys("Tell me a story about a dog.")
    driver.find_element(By.ID, "send").click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".msg.user"))
    assert driver.find_elements(By.CSS_SELECTOR, ".msg.user")[-1].text == "Tell me a story about a dog."
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
    sent = driver.execute_script("return history.map(m => m.role + ':' + m.content)")
    assert not any("This one fails." in m for m in sent), sent
    assert [m.split(":")[0] for m in sent] == ["user", "assistant", "user", "assistant"], sent
    driver.save_screenshot(tempfile.gettempdir() + "/llamars-webui.png")
    # Phone width: the input, the buttons and the messages fit the screen; the settings
    # open from a button and close again.
    driver.set_window_size(390, 844)
    width = driver.execute_script("return document.documentElement.clientWidth")
    for el in driver.find_elements(By.CSS_SELECTOR, "#input, #send, #stop, #clear, .msg, #settings-toggle"):
        r = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right];", el)
        assert r[0] >= 0 and r[1] <= width + 1, (el.get_attribute("id") or el.get_attribute("class"), r, width)
    assert driver.execute_script("return document.documentElement.scrollWidth") <= width + 1
    height = driver.execute_script("return window.innerHeight")
    for el in driver.find_elements(By.CSS_SELECTOR, "#input, #send"):
        bottom = driver.execute_script("return arguments[0].getBoundingClientRect().bottom", el)
        assert bottom <= height + 1, (el.get_attribute("id"), bottom, height)
    assert not driver.find_element(By.ID, "temperature").is_displayed()
    driver.find_element(By.ID, "settings-toggle").click()
    assert driver.find_element(By.ID, "temperature").is_displayed()
    driver.find_element(By.ID, "settings-toggle").click()
    assert driver.find_element(By.ID, "send").is_displayed()
    driver.save_screenshot(tempfile.gettempdir() + "/llamars-webui-phone.png")
    print("web ui: 1 passed, 0 failed")
finally:
    driver.quit()
