"""The official `openai` Python client against llama-server: chat and completions,
plain and streamed; structured output (`response_format` json_schema), tools
(`required` and a named tool, streamed calls assembled by the client, a conversation
with tool results) and `n`. Usage: openai_client.py BASE_URL MODEL. Exits non-zero on
failure."""
import json
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
