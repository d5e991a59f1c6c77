"""The official `openai` Python client against llama-server: chat and completions,
plain and streamed. Usage: openai_client.py BASE_URL MODEL. Exits non-zero on failure."""
import sys

import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test")

models = client.models.list()
assert models.data[0].id == model, models

chat = client.chat.completions.create(
    model=model,
    messages=[{"role": "system", "content": "You are a storyteller."},
              {"role": "user", "content": "Tell me about a cat."}],
    max_tokens=48, temperature=0)
text = chat.choices[0].message.content
assert text == "\"Here!\" Asked Jacky.\nThey was a small bird. Asked Jack, \"What's areat,", repr(text)
assert chat.choices[0].finish_reason == "length"
assert chat.usage.completion_tokens == 48

stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "system", "content": "You are a storyteller."},
              {"role": "user", "content": "Tell me about a cat."}],
    max_tokens=48, temperature=0, stream=True, stream_options={"include_usage": True})
parts, usage, finish = [], None, None
for chunk in stream:
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        if c.delta.content:
            parts.append(c.delta.content)
        if c.finish_reason:
            finish = c.finish_reason
assert "".join(parts) == text, repr("".join(parts))
assert finish == "length" and usage.completion_tokens == 48, (finish, usage)

cmpl = client.completions.create(model=model, prompt="Once upon a time", max_tokens=64, temperature=0)
want = (", there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
        "a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said")
assert cmpl.choices[0].text == want, repr(cmpl.choices[0].text)

streamed = "".join(c.choices[0].text for c in client.completions.create(
    model=model, prompt="Once upon a time", max_tokens=64, temperature=0, stream=True) if c.choices)
assert streamed == want, repr(streamed)

try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    raise AssertionError("an unknown model was accepted")
except openai.NotFoundError as e:
    assert "not found" in str(e)
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}], temperature=-3)
    raise AssertionError("a negative temperature was accepted")
except openai.BadRequestError:
    pass
print("openai client: 2 passed, 0 failed")
