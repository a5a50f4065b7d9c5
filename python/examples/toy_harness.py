"""A stand-in for an unmodified agent harness: two chat calls through
OPENAI_BASE_URL with OPENAI_API_KEY, as any OpenAI-compatible agent makes
them. It prints each answer; the examples' verifier reads them."""

import json
import os
import urllib.request

messages = [{"role": "user", "content": "Fix the failing test."}]
for _ in range(2):
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "toy", "messages": messages}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
    )
    answer = json.load(urllib.request.urlopen(req))["choices"][0]["message"]["content"]
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": "Go on."}]
    print(answer)
