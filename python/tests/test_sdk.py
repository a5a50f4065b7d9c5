"""Tests of the orchard package against a real ``orchard envd`` and ``orchard proxy``.

The Go test python/sdk_test.go starts both (envd on the local backend,
the proxy in front of a scripted upstream) and runs this suite with:

    ORCHARD_TEST_ENVD_URL, ORCHARD_TEST_API_KEY    the envd and its token
    ORCHARD_TEST_PROXY_URL, ORCHARD_TEST_ADMIN_TOKEN  the proxy and its admin token
    ORCHARD_TEST_HARNESS_PYTHON                    a python3 the sandbox can run
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import unittest
from unittest import mock

import orchard
from orchard import APIError, AsyncSandboxClient, SandboxClient, ServerUnavailable

ENV = {k: os.environ.get(k, "") for k in (
    "ORCHARD_TEST_ENVD_URL", "ORCHARD_TEST_API_KEY", "ORCHARD_TEST_PROXY_URL",
    "ORCHARD_TEST_ADMIN_TOKEN", "ORCHARD_TEST_HARNESS_PYTHON")}

#: The examples' stand-in harness: two chat calls through OPENAI_BASE_URL.
with open(os.path.join(os.path.dirname(__file__), "..", "examples", "toy_harness.py"), "rb") as _f:
    HARNESS = _f.read()

PATCH = "--- a/file.txt\n+++ b/file.txt\n@@ -1 +1,2 @@\n line1\n+line2\n"


def client(**kwargs) -> SandboxClient:
    args = dict(base_url=ENV["ORCHARD_TEST_ENVD_URL"], api_key=ENV["ORCHARD_TEST_API_KEY"],
                proxy_url=ENV["ORCHARD_TEST_PROXY_URL"], admin_token=ENV["ORCHARD_TEST_ADMIN_TOKEN"],
                retry_delay=0.05)
    args.update(kwargs)
    return SandboxClient(**args)


@unittest.skipUnless(ENV["ORCHARD_TEST_ENVD_URL"], "run by python/sdk_test.go, which starts envd and the proxy")
class SandboxTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = client()
        self.addCleanup(self.client.cleanup_all)

    def test_lifecycle(self) -> None:
        with self.client.create_sandbox("default", block_network=False) as sb:
            self.assertEqual(sb.image, "default")
            self.assertFalse(sb.block_network)
            again = self.client.get_sandbox(sb.sandbox_id)
            self.assertEqual(again.sandbox_id, sb.sandbox_id)
            self.assertEqual(sb.heartbeat(), {"status": "ok", "sandbox_id": sb.sandbox_id})
            self.assertEqual(self.client.health(), {"status": "healthy"})
        with self.assertRaises(APIError) as ctx:
            self.client.get_sandbox(sb.sandbox_id)
        self.assertEqual(ctx.exception.status_code, 404)
        self.assertEqual(ctx.exception.detail, f"Sandbox {sb.sandbox_id} not found")
        with self.assertRaises(RuntimeError):
            sb.exec("true")

    def test_prefix(self) -> None:
        c = client(prefix="sdkt")
        self.addCleanup(c.cleanup_all)
        sb = c.create_sandbox("default", sandbox_id="one")
        self.assertEqual(sb.sandbox_id, "sdkt-one")
        self.assertTrue(sb.block_network)
        self.assertEqual(sb.exec("echo isolated").stdout, "isolated\n")
        sb.delete()

    def test_exec(self) -> None:
        with self.client.create_sandbox("default") as sb:
            r = sb.exec("echo hello; echo oops >&2; pwd")
            self.assertEqual((r.status, r.exit_code, r.stdout, r.stderr), ("succeeded", 0, "hello\n/workspace\n", "oops\n"))
            self.assertTrue(r.succeeded and r.is_complete)
            r = sb.exec(["sh", "-c", "'exit 7'"])
            self.assertEqual((r.status, r.exit_code), ("failed", 7))
            r = sb.exec("echo $A-$B", env={"A": "1", "B": "2"}, cwd="/tmp")
            self.assertEqual(r.stdout, "1-2\n")
            r = sb.exec("sleep 30", timeout=1)
            self.assertEqual((r.status, r.exit_code, r.error), ("failed", 124, "Command timed out after 1s"))
            queued = sb.exec("echo later", wait=False)
            self.assertEqual(queued.status, "queued")
            done = sb.wait_job(queued.job_id, timeout=30)
            self.assertEqual((done.status, done.stdout), ("succeeded", "later\n"))
            self.assertEqual(sb.get_job(queued.job_id).stdout, "later\n")

    def test_exec_stream(self) -> None:
        with self.client.create_sandbox("default") as sb:
            events = list(sb.exec_stream("echo one; echo two >&2; exit 3"))
            out = "".join(e.data for e in events if e.type == "stdout")
            err = "".join(e.data for e in events if e.type == "stderr")
            self.assertEqual((out, err), ("one\n", "two\n"))
            self.assertEqual(events[-1], orchard.ExecEvent("exit", exit_code=3))

    def test_files(self) -> None:
        with self.client.create_sandbox("default") as sb:
            data = bytes(range(256))
            self.assertEqual(sb.upload_content(data, "/workspace/dir/blob.bin"),
                             {"success": True, "path": "/workspace/dir/blob.bin", "size": 256})
            self.assertEqual(sb.download_content("/workspace/dir/blob.bin"), data)
            sb.upload_content(b"line1\n", "/workspace/file.txt")
            names = [(f["name"], f["type"], f["size"]) for f in sb.list_files("/workspace")]
            self.assertEqual(names[1:], [("file.txt", "file", 6)])
            self.assertEqual(names[0][:2], ("dir", "directory"))
            res = sb.apply_patch(PATCH)
            self.assertTrue(res["success"], res)
            self.assertEqual(sb.download_content("/workspace/file.txt"), b"line1\nline2\n")
            self.assertFalse(sb.apply_patch(PATCH)["success"])
            with self.assertRaises(APIError) as ctx:
                sb.download_content("/workspace/missing")
            self.assertEqual(ctx.exception.status_code, 404)

    def test_bad_input(self) -> None:
        with self.assertRaises(APIError) as ctx:
            self.client.create_sandbox("ubuntu:22.04")
        self.assertEqual(ctx.exception.status_code, 400)
        self.assertIn('field "image"', ctx.exception.detail)
        with self.assertRaises(APIError) as ctx:
            self.client._request("GET", "/jobs/no-such-job")
        self.assertEqual((ctx.exception.status_code, ctx.exception.detail), (404, "Job no-such-job not found"))

    def test_api_key(self) -> None:
        no_env_key = {k: "" for k in ("SANDBOX_API_KEY", "ORCHARD_ENVD_TOKEN")}
        for key, status in (("wrong-key", 403), ("", 401)):
            with mock.patch.dict(os.environ, no_env_key):
                c = SandboxClient(ENV["ORCHARD_TEST_ENVD_URL"], api_key=key or None, auto_cleanup=False)
            with self.assertRaises(APIError) as ctx:
                c.create_sandbox("default")
            self.assertEqual(ctx.exception.status_code, status)

    def test_dead_server(self) -> None:
        c = SandboxClient("http://127.0.0.1:9", auto_cleanup=False, retry_delay=0.01)
        start = time.monotonic()
        with self.assertRaises(ServerUnavailable) as ctx:
            c.create_sandbox("default")
        self.assertIn("server unreachable after 3 attempts", str(ctx.exception))
        self.assertIsInstance(ctx.exception, ConnectionError)
        self.assertLess(time.monotonic() - start, 30)

    def test_async(self) -> None:
        async def run() -> tuple[str, str]:
            async with AsyncSandboxClient(ENV["ORCHARD_TEST_ENVD_URL"], api_key=ENV["ORCHARD_TEST_API_KEY"]) as c:
                async with await c.create_sandbox("default") as a, await c.create_sandbox("default") as b:
                    ra, rb = await asyncio.gather(a.exec("echo a"), b.exec("echo b"))
                    return ra.stdout, rb.stdout
        self.assertEqual(asyncio.run(run()), ("a\n", "b\n"))

    def test_cleanup_on_sigterm(self) -> None:
        code = ("import os, signal, sys, orchard\n"
                "c = orchard.SandboxClient(sys.argv[1], api_key=sys.argv[2])\n"
                "sb = c.create_sandbox('default')\n"
                "print(sb.sandbox_id, flush=True)\n"
                "signal.pause()\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen([sys.executable, "-c", code, ENV["ORCHARD_TEST_ENVD_URL"], ENV["ORCHARD_TEST_API_KEY"]],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        sid = proc.stdout.readline().strip()
        self.assertTrue(sid, proc.stderr.read() if not sid else "")
        self.client.get_sandbox(sid)  # alive
        proc.terminate()
        _, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, -15, err)
        self.assertIn("[Cleanup] Deleting 1 sandbox(es) on exit...", err)
        with self.assertRaises(APIError) as ctx:
            self.client.get_sandbox(sid)
        self.assertEqual(ctx.exception.status_code, 404)


@unittest.skipUnless(ENV["ORCHARD_TEST_PROXY_URL"], "run by python/sdk_test.go, which starts envd and the proxy")
class EpisodeTest(unittest.TestCase):
    def test_episode_samples(self) -> None:
        c = client()
        self.addCleanup(c.cleanup_all)
        ep = c.start_episode("fix-test", group_id="g-1", metadata={"split": "train"})
        self.assertEqual(ep.base_url, ep.env["OPENAI_BASE_URL"])
        self.assertEqual(ep.api_key, ep.env["OPENAI_API_KEY"])
        with c.create_sandbox("default", block_network=False) as sb:
            sb.upload_content(HARNESS, "/workspace/harness.py")
            r = sb.exec(f"{ENV['ORCHARD_TEST_HARNESS_PYTHON']} harness.py", env=ep.env)
            self.assertEqual((r.exit_code, r.stdout), (0, "I will look.\nFixed it.\n"), r.stderr)
        ep.event("tests", passed=3, failed=0)
        done = ep.finish(reward=1.0, status="success", info={"tests": "3/3"})
        self.assertEqual((done["status"], done["reward"]), ("success", 1.0))
        samples = ep.samples(min_calls=2)
        self.assertEqual(len(samples), 1)
        s = samples[0]
        self.assertEqual((s["schema"], s["episode_id"], s["task_id"], s["group_id"]),
                         ("orchard.trajectory/v1", ep.id, "fix-test", "g-1"))
        self.assertEqual(s["tokens"]["input_ids"], [1, 2, 3, 10, 11, 4, 5, 12, 13, 14])
        self.assertEqual(s["tokens"]["loss_mask"], [0, 0, 0, 1, 1, 0, 0, 1, 1, 1])
        self.assertEqual(s["tokens"]["logprobs"], [0, 0, 0, -0.1, -0.2, 0, 0, -0.3, -0.4, -0.5])
        self.assertEqual(s["outcome"]["reward"], 1.0)
        turns = ep.samples(format="turns", min_calls=2)
        self.assertEqual([t["tokens"]["completion_ids"] for t in turns], [[10, 11], [12, 13, 14]])
        with self.assertRaises(APIError) as ctx:
            ep.samples(format="csv")
        self.assertEqual(ctx.exception.status_code, 400)

    def test_running_episode_has_no_samples(self) -> None:
        ep = client().start_episode("t")
        with self.assertRaises(APIError) as ctx:
            ep.samples()
        self.assertEqual(ctx.exception.status_code, 409)
        ep.finish(reward=0.0, status="failure")


if __name__ == "__main__":
    unittest.main()
