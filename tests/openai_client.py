"""The official `openai` Python client against llama-server: chat and completions,
plain and streamed; structured output (`response_format` json_schema), tools
(`required` and a named tool, streamed calls assembled by the client, a conversation
with tool results) and `n`. With a third argument `embeddings`, against a server started
with `--embedding --pooling mean`: embeddings as floats, as the client's default base64
(decoded by the client) and as raw base64, usage, and completions refused. Usage:
openai_client.py BASE_URL MODEL [embeddings]. Exits non-zero on failure."""
import base64
import json
import math
import struct
import sys

import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="sk-test")


def embeddings_checks():
    texts = ["hello world", "Once upon a time", "a cat"]
    f = client.embeddings.create(model=model, input=texts, encoding_format="float")
    assert [d.index for d in f.data] == [0, 1, 2], f
    vecs = [d.embedding for d in f.data]
    assert all(len(v) == len(vecs[0]) > 0 for v in vecs), [len(v) for v in vecs]
    # Normalised to unit length (llama.cpp's default, --embd-normalize 2).
    assert all(abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5 for v in vecs), vecs
    assert vecs[0] != vecs[1]
    assert f.usage.prompt_tokens == f.usage.total_tokens > len(texts), f.usage
    # A request batches its inputs on whichever slots are free: another batch order
    # moves the last bits.
    def close(a, b):
        return len(a) == len(b) and all(abs(x - y) < 1e-6 for x, y in zip(a, b))

    # The client's default asks for base64 and decodes it: the same floats.
    d = client.embeddings.create(model=model, input=texts)
    assert all(close(e.embedding, v) for e, v in zip(d.data, vecs)), "base64 (client-decoded) differs"
    # Raw base64: little-endian float32 bytes.
    r = client.embeddings.create(model=model, input=texts[0], encoding_format="base64")
    raw = r.data[0].embedding
    if not isinstance(raw, str):  # a client that decodes even when asked for base64
        assert close(list(raw), vecs[0])
    else:
        b = base64.b64decode(raw)
        assert close(list(struct.unpack("<%df" % (len(b) // 4), b)), vecs[0])
    # One string, and token ids.
    one = client.embeddings.create(model=model, input=texts[1], encoding_format="float")
    assert close(one.data[0].embedding, vecs[1])
    ids = client.embeddings.create(model=model, input=[[1, 2, 3]], encoding_format="float")
    assert ids.usage.prompt_tokens == 3, ids.usage
    for bad in ({"input": []}, {"input": "x", "encoding_format": "hex"}):
        try:
            client.embeddings.create(model=model, **bad)
            raise AssertionError(f"accepted {bad}")
        except openai.BadRequestError:
            pass
    try:
        client.completions.create(model=model, prompt="x", max_tokens=2)
        raise AssertionError("an embeddings server completed text")
    except openai.APIStatusError as e:
        assert e.status_code == 501, e
    print("openai client (embeddings): 9 passed, 0 failed")


if len(sys.argv) > 3 and sys.argv[3] == "embeddings":
    embeddings_checks()
    sys.exit(0)

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

# A single-model server serves whatever name the client hard-codes, as llama.cpp's.
other = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}], max_tokens=2)
assert other.model == model, other.model
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}], temperature=-3)
    raise AssertionError("a negative temperature was accepted")
except openai.BadRequestError:
    pass


def check(value, schema, path="$"):
    """The subset of JSON Schema these checks use: type, properties, required,
    additionalProperties false, enum, minimum/maximum, maxLength."""
    if "enum" in schema:
        assert value in schema["enum"], (path, value)
    t = schema.get("type")
    if t == "object":
        assert isinstance(value, dict), (path, value)
        for r in schema.get("required", []):
            assert r in value, (path, "missing", r)
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                check(v, props[k], path + "." + k)
            else:
                assert schema.get("additionalProperties", True) is not False, (path, "extra", k)
    elif t == "string":
        assert isinstance(value, str), (path, value)
        assert len(value) <= schema.get("maxLength", len(value)), (path, value)
    elif t == "integer":
        assert isinstance(value, int) and not isinstance(value, bool), (path, value)
        assert schema.get("minimum", value) <= value <= schema.get("maximum", value), (path, value)
    elif t == "boolean":
        assert isinstance(value, bool), (path, value)


# Structured output: the answer is JSON that follows the schema.
person = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 8},
                         "color": {"enum": ["red", "green", "blue"]},
                         "count": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "color", "count"], "additionalProperties": False}
r = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Describe a person."}], max_tokens=200, temperature=0,
    response_format={"type": "json_schema", "json_schema": {"name": "person", "strict": True, "schema": person}})
check(json.loads(r.choices[0].message.content), person)
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "x"}],
                                   response_format={"type": "bogus"})
    raise AssertionError("a bogus response_format was accepted")
except openai.BadRequestError as e:
    assert "bogus" in str(e), e

# Tools: required, then a named one; every call's arguments follow its tool's parameters.
weather = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city for some days.",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string", "maxLength": 12},
                                  "days": {"type": "integer", "minimum": 1, "maximum": 7}},
                   "required": ["city", "days"], "additionalProperties": False}}}
clock = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
                   "required": ["zone"], "additionalProperties": False}}}
tools = [weather, clock]
by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
question = [{"role": "user", "content": "What is the weather in Paris?"}]


def checked_calls(choice):
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls, choice
    for c in calls:
        assert c.type == "function" and c.id, c
        check(json.loads(c.function.arguments), by_name[c.function.name])
    return calls


r = client.chat.completions.create(model=model, messages=question, tools=tools, tool_choice="required",
                                   max_tokens=160, temperature=0)
calls = checked_calls(r.choices[0])
r_named = client.chat.completions.create(
    model=model, messages=question, tools=tools, max_tokens=160, temperature=0,
    tool_choice={"type": "function", "function": {"name": "get_time"}})
assert all(c.function.name == "get_time" for c in checked_calls(r_named.choices[0])), r_named

# Streamed: the client's deltas assemble to the same calls.
assembled, finish = {}, None
for chunk in client.chat.completions.create(model=model, messages=question, tools=tools, tool_choice="required",
                                            max_tokens=160, temperature=0, stream=True):
    for c in chunk.choices:
        for tc in c.delta.tool_calls or []:
            a = assembled.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                a["id"] = tc.id
            if tc.function and tc.function.name:
                a["name"] += tc.function.name
            if tc.function and tc.function.arguments:
                a["arguments"] += tc.function.arguments
        if c.finish_reason:
            finish = c.finish_reason
assert finish == "tool_calls", finish
got = [(assembled[i]["name"], assembled[i]["arguments"]) for i in sorted(assembled)]
assert got == [(c.function.name, c.function.arguments) for c in calls], (got, calls)
assert all(assembled[i]["id"] for i in assembled), assembled

# A conversation with the tool's results.
messages = question + [r.choices[0].message.model_dump(exclude_none=True)] + [
    {"role": "tool", "tool_call_id": c.id, "content": "Sunny, 24 C"} for c in calls]
follow = client.chat.completions.create(model=model, messages=messages, tools=tools, max_tokens=16, temperature=0)
assert follow.choices[0].finish_reason in ("stop", "length", "tool_calls"), follow
assert follow.usage.prompt_tokens > r.usage.prompt_tokens, (follow.usage, r.usage)

# n: two choices.
two = client.chat.completions.create(model=model, messages=question, max_tokens=8, temperature=0, n=2)
assert [c.index for c in two.choices] == [0, 1], two
assert two.choices[0].message.content == two.choices[1].message.content, two
print("openai client: 8 passed, 0 failed")
