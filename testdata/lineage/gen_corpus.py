#!/usr/bin/env python3
"""Generates the drift corpus: one orchard.call/v1 JSONL file per episode.

Run from this directory: python3 gen_corpus.py. The records are synthetic
but shaped like what the proxy records for vLLM (chat.completions with
tokens), Claude Code (messages), Codex (responses) and a completions client.

Token ids come from a toy tokenizer (one id per word, punctuation mark or
newline run; Qwen's ids for the special tokens) and a ChatML template in the
style of Qwen3's: tools in the system turn, tool results as <tool_response>
user turns, and, for the "qwen3" flavour, reasoning of assistant turns
before the last user query left out. The expected kind of every call is in
README.md and in lineage's corpus_test.go.
"""

import copy
import hashlib
import json
import re

SPECIAL = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<think>": 151667,
    "</think>": 151668,
}
PIECE = re.compile(
    "(" + "|".join(map(re.escape, SPECIAL)) + r")|\n+|[ ]?[A-Za-z0-9_]+|[ ]?[^\sA-Za-z0-9_]|\s"
)


def tok(text):
    ids = []
    for m in PIECE.finditer(text):
        p = m.group(0)
        if p in SPECIAL:
            ids.append(SPECIAL[p])
        else:
            ids.append(1000 + int(hashlib.md5(p.encode()).hexdigest()[:8], 16) % 140000)
    assert "".join(m.group(0) for m in PIECE.finditer(text)) == text
    return ids


def tool_call_text(tc):
    body = {"name": tc["function"]["name"], "arguments": json.loads(tc["function"]["arguments"])}
    return "<tool_call>\n" + json.dumps(body) + "\n</tool_call>"


def assistant_text(content, calls, reasoning=None):
    s = ""
    if reasoning is not None:
        s += "<think>\n" + reasoning + "\n</think>\n\n"
    s += content or ""
    for i, tc in enumerate(calls or []):
        if i > 0 or content:
            s += "\n"
        s += tool_call_text(tc)
    return s


def render(messages, tools, flavour="plain"):
    """Renders a ChatML prompt with the generation prompt appended."""
    out = ""
    msgs = list(messages)
    if tools:
        sys = msgs.pop(0)["content"] if msgs and msgs[0]["role"] == "system" else ""
        out += "<|im_start|>system\n" + sys + "\n\n# Tools\n<tools>\n"
        out += "\n".join(json.dumps(t) for t in tools) + "\n</tools><|im_end|>\n"
    last_query = -1
    for i, m in enumerate(msgs):
        if m["role"] == "user":
            last_query = i
    for i, m in enumerate(msgs):
        role, content = m["role"], m.get("content")
        if isinstance(content, list):
            content = "".join(p["text"] for p in content)
        if role == "assistant":
            reasoning = m.get("reasoning_content")
            if flavour == "qwen3" and i < last_query:
                reasoning = None
            out += "<|im_start|>assistant\n" + assistant_text(content, m.get("tool_calls"), reasoning)
            out += "<|im_end|>\n"
        elif role == "tool":
            out += "<|im_start|>user\n<tool_response>\n" + content + "\n</tool_response><|im_end|>\n"
        else:
            out += "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"
    return out + "<|im_start|>assistant\n"


class Episode:
    def __init__(self, name, api, harness, upstream_kind="vllm", model="Qwen/Qwen3-8B"):
        self.name, self.api, self.harness = name, api, harness
        self.upstream_kind, self.model = upstream_kind, model
        self.records = []

    def record(self, request, response, tokens=None, status=200, end="done", stream=True):
        seq = len(self.records) + 1
        path = {
            "chat.completions": "/v1/chat/completions",
            "completions": "/v1/completions",
            "responses": "/v1/responses",
            "messages": "/v1/messages",
        }[self.api]
        rec = {
            "schema": "orchard.call/v1",
            "episode_id": self.name,
            "seq": seq,
            "call_id": "%s-c%d" % (self.name, seq),
            "api": self.api,
            "method": "POST",
            "path": path,
            "model": self.model,
            "stream": stream,
            "started_at": "2026-11-30T10:%02d:00Z" % seq,
            "ended_at": "2026-11-30T10:%02d:30Z" % seq,
            "status": status,
            "end_reason": end,
            "request": request,
        }
        if response is not None:
            rec["response"] = response
            if "usage" in response:
                rec["usage"] = response["usage"]
        rec["upstream"] = "http://127.0.0.1:8000/v1"
        rec["upstream_kind"] = self.upstream_kind
        rec["harness"] = self.harness
        if tokens is not None:
            rec["tokens"] = tokens
        self.records.append(rec)

    def write(self):
        with open(self.name + ".jsonl", "w") as f:
            for r in self.records:
                f.write(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n")


# ---- chat.completions with vLLM token ids -------------------------------------------------

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_shell",
            "description": "Run a shell command in the workspace.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]
SYSTEM = (
    "You are a coding agent. You work in /workspace. Use the run_shell tool to inspect and change "
    "files, then answer briefly. Never invent file contents; read them first."
)


class Chat:
    """A chat.completions conversation against a vLLM-style upstream."""

    def __init__(self, ep, system=SYSTEM, tools=TOOLS, flavour="plain", with_tokens=True):
        self.ep, self.tools, self.flavour, self.with_tokens = ep, tools, flavour, with_tokens
        self.messages = [{"role": "system", "content": system}]
        self.n = 0

    def request(self, messages=None):
        req = {"model": self.ep.model, "messages": copy.deepcopy(messages or self.messages)}
        if self.tools:
            req["tools"] = self.tools
        req["stream"] = True
        req["stream_options"] = {"include_usage": True}
        return req

    def call(self, content="", calls=None, reasoning=None, completion_ids=None, eos="<|im_end|>",
             messages=None, status=200, end="done", echo=None):
        """Makes one call; the reply is the assistant message the model generates."""
        self.n += 1
        msgs = messages if messages is not None else self.messages
        prompt = render(msgs, self.tools, self.flavour)
        gen = assistant_text(content, calls, reasoning) + eos
        ids = completion_ids if completion_ids is not None else tok(gen)
        msg = {"role": "assistant", "content": content if content or not calls else None,
               "refusal": None, "annotations": []}
        if reasoning is not None:
            msg["reasoning_content"] = reasoning
        if calls:
            msg["tool_calls"] = calls
        resp = None
        if status == 200:
            resp = {
                "id": "chatcmpl-%s-%d" % (self.ep.name, self.n),
                "object": "chat.completion",
                "created": 1796032800 + self.n,
                "model": self.ep.model,
                "choices": [{"index": 0, "message": msg, "logprobs": None,
                             "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {"prompt_tokens": len(tok(prompt)), "completion_tokens": len(ids),
                          "total_tokens": len(tok(prompt)) + len(ids)},
            }
        tokens = None
        if self.with_tokens:
            tokens = {"prompt_ids": tok(prompt), "completion_ids": ids if status == 200 else []}
        self.ep.record(self.request(msgs), resp, tokens, status=status, end=end)
        # What the harness echoes back next turn: no refusal/annotations, and
        # reasoning_content only if asked to keep it.
        back = {"role": "assistant", "content": content}
        if calls:
            back["tool_calls"] = calls
        if echo == "reasoning" and reasoning is not None:
            back["reasoning_content"] = reasoning
        return back


def tc(i, cmd):
    return {"id": "call_%d" % i, "type": "function",
            "function": {"name": "run_shell", "arguments": json.dumps({"cmd": cmd})}}


def continuation_chat_tokens():
    ep = Episode("continuation-chat-tokens", "chat.completions", "QwenCode/0.15.10 (linux; x64)")
    ch = Chat(ep)
    ch.messages.append({"role": "user", "content": "List the Go files."})
    back = ch.call(calls=[tc(1, "ls *.go")])                                    # root
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": "main.go\nutil.go"}]
    back = ch.call(content="There are two Go files: main.go and util.go.")       # extend
    ch.messages += [back, {"role": "user", "content": [{"type": "text", "text": "Count their lines."}]}]
    back = ch.call(calls=[tc(2, "wc -l main.go util.go")])                      # extend
    # The harness re-serialises earlier messages (other key order, null
    # content written as "") - still an exact continuation.
    ch.messages[2] = {"content": "", "tool_calls": ch.messages[2]["tool_calls"], "role": "assistant"}
    ch.messages += [back, {"tool_call_id": "call_2", "content": "  40 main.go\n  12 util.go\n  52 total",
                           "role": "tool"}]
    ch.call(content="main.go has 40 lines and util.go has 12.")                 # extend
    ep.write()


def retokenized_chat_tokens():
    ep = Episode("retokenized-chat-tokens", "chat.completions", "opencode/1.18.33")
    ch = Chat(ep)
    ch.messages.append({"role": "user", "content": "Is the build green?"})
    # The model stopped on <|endoftext|>; the template closes the turn with <|im_end|>.
    back = ch.call(content="I will check the build.", calls=[tc(1, "make build")], eos="<|endoftext|>")
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": "ok"}]
    # The model spelled its last word as two ids (" file", "s"); the template
    # re-tokenises the text as one id (" files").
    text = "The build is green; no errors in any of the files"
    ids = tok(text)[:-1] + tok(" file") + tok("s") + [SPECIAL["<|im_end|>"]]
    back = ch.call(content=text, completion_ids=ids)                            # retokenized
    ch.messages += [back, {"role": "user", "content": "Thanks."}]
    ch.call(content="You are welcome.")                                         # retokenized
    ep.write()


def template_rewrite_qwen3_tokens():
    ep = Episode("template-rewrite-qwen3-tokens", "chat.completions", "QwenCode/0.15.10 (linux; x64)")
    ch = Chat(ep, flavour="qwen3")
    ch.messages.append({"role": "user", "content": "What does main.go print?"})
    back = ch.call(calls=[tc(1, "cat main.go")], reasoning="I should read main.go first.", echo="reasoning")
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1",
                           "content": "package main\nfunc main() { println(\"hi\") }"}]
    # Still a tool loop: reasoning after the last user query is kept.
    back = ch.call(content="It prints hi.", reasoning="The file calls println with hi.", echo="reasoning")
    ch.messages += [back, {"role": "user", "content": "Make it print bye."}]          # extend (above)
    # A new user query: the template drops the <think> blocks of both earlier turns.
    back = ch.call(calls=[tc(2, "sed -i s/hi/bye/ main.go")], reasoning="Replace hi with bye.",
                   echo="reasoning")                                                 # template_rewrite
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_2", "content": ""}]
    ch.call(content="Done: main.go now prints bye.", reasoning="The edit succeeded.")  # extend
    ep.write()


def edited_chat_tokens():
    ep = Episode("edited-chat-tokens", "chat.completions", "opencode/1.18.33")
    ch = Chat(ep)
    ch.messages.append({"role": "user", "content": "Find TODO comments."})
    back = ch.call(calls=[tc(1, "grep -rn TODO .")])
    long_output = "\n".join("src/f%d.go:%d: // TODO: handle error %d" % (i, i * 7, i) for i in range(30))
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": long_output}]
    back = ch.call(content="There are 30 TODO comments, all about error handling.")
    ch.messages += [back, {"role": "user", "content": "Fix the first one."}]
    back = ch.call(calls=[tc(2, "sed -n 1,20p src/f0.go")])
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_2", "content": "package src\n// TODO"}]
    # The harness prunes the old grep output to save context.
    ch.messages[3] = {"role": "tool", "tool_call_id": "call_1", "content": "[Old tool result content cleared]"}
    ch.call(content="The first TODO is at the top of src/f0.go.")                    # edited
    ep.write()


def fork_chat_tokens():
    """opencode: a title generator call (another system prompt) beside the main thread."""
    ep = Episode("fork-chat-tokens", "chat.completions", "opencode/1.18.33")
    main = Chat(ep)
    main.messages.append({"role": "user", "content": "Run echo"})
    back = main.call(calls=[tc(1, "echo mock-tool-ok")])                             # root
    title = Chat(ep, system="You are a title generator. You output ONLY a thread title.", tools=None)
    title.messages.append({"role": "user", "content": "Generate a title for this conversation: Run echo"})
    title.call(content="Running echo")                                               # fork
    main.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": "mock-tool-ok\n"}]
    main.call(content="The command printed mock-tool-ok.")                           # extend
    ep.write()


def retry_chat_tokens():
    ep = Episode("retry-chat-tokens", "chat.completions", "QwenCode/0.15.10 (linux; x64)")
    ch = Chat(ep)
    ch.messages.append({"role": "user", "content": "Run the tests."})
    back = ch.call(calls=[tc(1, "go test ./...")])                                   # root
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": "ok  \tpkg\t0.1s"}]
    ch.call(content="", status=502, end="upstream_error")                            # extend (failed)
    back = ch.call(content="All tests pass.")                                        # retry
    ch.messages += [back, {"role": "user", "content": "Great."}]
    ch.call(content="Anything else?")                                                # extend
    ep.write()


def edited_chat():
    """The same harness edit as edited-chat-tokens, recorded without token ids."""
    ep = Episode("edited-chat", "chat.completions", "opencode/1.18.33", upstream_kind="openai", model="gpt-5")
    ch = Chat(ep, with_tokens=False)
    ch.messages.append({"role": "user", "content": "Rename Foo to Bar in api.go."})
    back = ch.call(calls=[tc(1, "grep -n Foo api.go")])
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_1", "content": "3:type Foo struct{}"}]
    back = ch.call(calls=[tc(2, "sed -i s/Foo/Bar/ api.go")])
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_2", "content": ""}]
    back = ch.call(content="Renamed Foo to Bar.")
    # The user edits their first message and the harness re-runs from there.
    ch.messages[1] = {"role": "user", "content": "Rename Foo to Baz in api.go."}
    ch.messages += [back, {"role": "user", "content": "Go on."}]
    ch.call(content="Renaming to Baz instead.")                                      # edited
    ep.write()


def compacted_chat_tokens():
    ep = Episode("compacted-chat-tokens", "chat.completions", "QwenCode/0.15.10 (linux; x64)")
    ch = Chat(ep)
    ch.messages.append({"role": "user", "content": "Audit the repository for unused functions."})
    for i in range(1, 4):
        back = ch.call(calls=[tc(i, "go vet ./pkg%d" % i)])
        out = "\n".join("pkg%d/file%d.go:%d: func helper%d is unused" % (i, j, j * 3, j) for j in range(40))
        ch.messages += [back, {"role": "tool", "tool_call_id": "call_%d" % i, "content": out}]
    ch.messages.append({"role": "user", "content": "Summarise the conversation so far for a fresh context."})
    summary = "Summary: the user asked for unused functions; pkg1 to pkg3 each have 40 unused helpers."
    ch.call(content=summary)                                                         # extend
    # The harness starts over from the system prompt and the summary.
    ch.messages = [ch.messages[0], {"role": "user", "content": summary + "\nContinue the audit with pkg4."}]
    back = ch.call(calls=[tc(4, "go vet ./pkg4")])                                   # compacted
    ch.messages += [back, {"role": "tool", "tool_call_id": "call_4", "content": "no issues"}]
    ch.call(content="pkg4 has no unused functions.")                                 # extend
    ep.write()


# ---- messages (Claude Code style, no token ids) -------------------------------------------

CC_SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.c40; cc_entrypoint=sdk-cli;"},
    {"type": "text", "text": "You are a Claude agent, built on Anthropic's Claude Agent SDK.",
     "cache_control": {"type": "ephemeral"}},
]
CC_TOOLS = [
    {"name": "Bash", "description": "Run a bash command.",
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Task", "description": "Launch a subagent.",
     "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}},
]


class Claude:
    def __init__(self, ep, system=CC_SYSTEM, tools=CC_TOOLS):
        self.ep, self.system, self.tools = ep, system, tools
        self.messages = []
        self.n = 0

    def call(self, blocks, status=200):
        """One call; blocks is the assistant content the model returns."""
        self.n += 1
        msgs = copy.deepcopy(self.messages)
        # Claude Code marks only the last message for prompt caching.
        last = msgs[-1]
        if isinstance(last["content"], list):
            last["content"][-1]["cache_control"] = {"type": "ephemeral"}
        req = {"model": self.ep.model, "messages": msgs, "system": self.system, "tools": self.tools,
               "metadata": {"user_id": "u1"}, "max_tokens": 32000,
               "thinking": {"type": "enabled", "budget_tokens": 4000}, "stream": True}
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        resp = {"id": "msg_%s_%d" % (self.ep.name.replace("-", "_"), self.n), "type": "message",
                "role": "assistant", "model": self.ep.model, "content": blocks,
                "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": 1200 + 300 * self.n, "output_tokens": 80}}
        self.ep.record(req, resp)
        return {"role": "assistant", "content": copy.deepcopy(blocks)}


def think(text):
    return {"type": "thinking", "thinking": text, "signature": "sig-" + hashlib.md5(text.encode()).hexdigest()}


def text(t):
    return {"type": "text", "text": t}


def tool_use(i, name, inp):
    return {"type": "tool_use", "id": "toolu_%02d" % i, "name": name, "input": inp}


def tool_result(i, content):
    return {"type": "tool_result", "tool_use_id": "toolu_%02d" % i, "content": content, "is_error": False}


def continuation_messages():
    ep = Episode("continuation-messages", "messages", "claude-cli/2.1.197 (external, sdk-cli)",
                 upstream_kind="anthropic", model="claude-opus-4-8")
    cc = Claude(ep)
    cc.messages.append({"role": "user", "content": [text("Run echo mock-tool-ok")]})
    back = cc.call([think("Run it."), tool_use(1, "Bash", {"command": "echo mock-tool-ok"})])  # root
    cc.messages += [back, {"role": "user", "content": [tool_result(1, "mock-tool-ok")]}]
    back = cc.call([text("It printed mock-tool-ok."), ])                                        # extend
    # The echo swaps key order inside the tool_use input and writes the first
    # user message as a plain string: the same conversation.
    cc.messages[0] = {"role": "user", "content": "Run echo mock-tool-ok"}
    cc.messages += [back, {"role": "user", "content": [text("And the date?")]}]
    back = cc.call([tool_use(2, "Bash", {"description": "date", "command": "date -u"})])        # extend
    back["content"][0]["input"] = {"command": "date -u", "description": "date"}
    cc.messages += [back, {"role": "user", "content": [tool_result(2, "Mon Nov 30 10:00:00 UTC 2026")]}]
    cc.call([text("It is Monday, 30 November 2026.")])                                          # extend
    ep.write()


def fork_messages():
    ep = Episode("fork-messages", "messages", "claude-cli/2.1.197 (external, sdk-cli)",
                 upstream_kind="anthropic", model="claude-opus-4-8")
    main = Claude(ep)
    main.messages.append({"role": "user", "content": [text("Review the repository layout.")]})
    prompt = "List every top-level directory and say what it holds."
    back = main.call([text("I'll delegate the listing."), tool_use(1, "Task", {"prompt": prompt})])  # root
    sub = Claude(ep, system=[text("You are a subagent. Answer the task and stop.")], tools=CC_TOOLS[:1])
    sub.messages.append({"role": "user", "content": [text(prompt)]})
    sback = sub.call([tool_use(2, "Bash", {"command": "ls -d */"})])                             # fork
    sub.messages += [sback, {"role": "user", "content": [tool_result(2, "cmd/\nproxy/\nrecorder/")]}]
    sub.call([text("cmd holds binaries, proxy forwards, recorder stores.")])                    # extend (thread 1)
    main.messages += [back, {"role": "user", "content": [
        tool_result(1, "cmd holds binaries, proxy forwards, recorder stores.")]}]
    main.call([text("The layout is clean.")])                                                   # extend (thread 0)
    # A second answer generated from the point before the tool result, with
    # another result: a parallel branch of the main thread.
    branch = Claude(ep)
    branch.messages = copy.deepcopy(main.messages)
    branch.messages[-1] = {"role": "user", "content": [tool_result(1, "(subagent failed)")]}
    branch.call([text("The subagent failed; I will list it myself.")])                          # fork (thread 2)
    ep.write()


# ---- responses (Codex style, no token ids) -------------------------------------------------

CODEX_TOOLS = [{"type": "function", "name": "exec_command", "description": "Run a command.",
                "strict": False,
                "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]


class Codex:
    def __init__(self, ep):
        self.ep = ep
        self.input = [
            {"type": "message", "id": "msg_dev1", "role": "developer",
             "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
            {"type": "message", "id": "msg_env", "role": "user",
             "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/workspace</cwd>\n</environment_context>"}]},
        ]
        self.n = 0

    def call(self, output, status=200, end="done", request_input=None):
        self.n += 1
        req = {"model": self.ep.model, "instructions": None, "input": copy.deepcopy(request_input or self.input),
               "tools": CODEX_TOOLS, "tool_choice": "auto", "parallel_tool_calls": False,
               "reasoning": {"effort": "medium", "summary": "auto"}, "store": False, "stream": True,
               "include": ["reasoning.encrypted_content"], "prompt_cache_key": "01a22996"}
        del req["instructions"]
        resp = None
        if status == 200:
            resp = {"id": "resp_%s_%d" % (self.ep.name.replace("-", "_"), self.n), "object": "response",
                    "created_at": 1796032800 + self.n, "status": "completed", "model": self.ep.model,
                    "output": output, "usage": {"input_tokens": 900 + 100 * self.n, "output_tokens": 40,
                                                "total_tokens": 940 + 100 * self.n}}
        self.ep.record(req, resp, status=status, end=end)
        return copy.deepcopy(output)


def fcall(i, cmd):
    return {"type": "function_call", "id": "fc_%d" % i, "status": "completed", "name": "exec_command",
            "arguments": json.dumps({"cmd": cmd}), "call_id": "call_%d" % i}


def fout(i, out):
    return {"type": "function_call_output", "call_id": "call_%d" % i, "output": out}


def reasoning(i):
    return {"type": "reasoning", "id": "rs_%d" % i, "summary": [], "encrypted_content": "gAAAA%d" % i}


def omsg(t):
    return {"type": "message", "id": "msg_out", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}]}


def retry_responses():
    ep = Episode("retry-responses", "responses", "codex_exec/0.171.0", upstream_kind="openai", model="gpt-5.3-codex")
    cx = Codex(ep)
    cx.input.append({"type": "message", "id": "msg_u1", "role": "user",
                     "content": [{"type": "input_text", "text": "Run echo"}]})
    cx.call(None, status=500, end="done")                                                   # root (failed)
    out = cx.call([reasoning(1), fcall(1, "echo mock-tool-ok")])                            # retry
    # Codex echoes the function call without its status and drops the id.
    echoed = [dict((k, v) for k, v in it.items() if k not in ("status", "id")) for it in out]
    cx.input += echoed + [fout(1, "mock-tool-ok\n")]
    out = cx.call([omsg("The command printed mock-tool-ok.")])                              # extend
    ep.write()


def compacted_responses():
    ep = Episode("compacted-responses", "responses", "codex_exec/0.171.0", upstream_kind="openai",
                 model="gpt-5.3-codex")
    cx = Codex(ep)
    task = {"type": "message", "id": "msg_u1", "role": "user",
            "content": [{"type": "input_text", "text": "Find the slowest test."}]}
    cx.input.append(task)
    for i in range(1, 4):
        out = cx.call([reasoning(i), fcall(i, "go test -v ./pkg%d" % i)])
        log = "\n".join("=== RUN TestCase%d_%d\n--- PASS: TestCase%d_%d (0.%02ds)" % (i, j, i, j, j)
                        for j in range(30))
        cx.input += out + [fout(i, log)]
    # Codex compacts: user messages stay, the rest becomes a summary message.
    summary = {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
               "Summary of earlier work: ran tests in pkg1..pkg3; the slowest so far is TestCase3_29 (0.29s)."}]}
    cx.input = cx.input[:3] + [summary]
    out = cx.call([reasoning(9), fcall(4, "go test -v ./pkg4")])                           # compacted
    cx.input += out + [fout(4, "--- PASS: TestCase4_0 (0.01s)")]
    cx.call([omsg("The slowest test is TestCase3_29.")])                                   # extend
    ep.write()


# ---- completions (text prompts, no token ids) ---------------------------------------------

def continuation_completions():
    ep = Episode("continuation-completions", "completions", "python-requests/2.32", upstream_kind="openai",
                 model="Qwen/Qwen3-8B-Base")
    prompt = "Q: What is 2+2?\nA:"
    answers = [" 4\n", "Q: And 3+3?\nA:", " 6\n"]

    def call(p, t, status=200):
        resp = None
        if status == 200:
            resp = {"id": "cmpl-%d" % (len(ep.records) + 1), "object": "text_completion", "model": ep.model,
                    "choices": [{"index": 0, "text": t, "finish_reason": "stop", "logprobs": None}],
                    "usage": {"prompt_tokens": len(tok(p)), "completion_tokens": len(tok(t))}}
        ep.record({"model": ep.model, "prompt": p, "max_tokens": 16, "stream": False}, resp, stream=False,
                  status=status)

    call(prompt, answers[0])                                               # root
    prompt2 = prompt + answers[0] + answers[1]
    call(prompt2, " 5\n")                                                  # extend
    call(prompt2, answers[2])                                              # retry
    call(prompt2 + answers[2] + "Q: And 4+4?\nA:", " 8\n")                 # extend (of the retry)
    ep.write()


if __name__ == "__main__":
    continuation_chat_tokens()
    continuation_messages()
    continuation_completions()
    retokenized_chat_tokens()
    template_rewrite_qwen3_tokens()
    edited_chat_tokens()
    edited_chat()
    compacted_chat_tokens()
    compacted_responses()
    fork_chat_tokens()
    fork_messages()
    retry_chat_tokens()
    retry_responses()
