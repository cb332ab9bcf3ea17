"""Rebuilding a session its replica lost: from a checkpoint, or by replaying its calls."""

import sys

from workplace_env_client import EnvironmentClient, SessionLostError

target = sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:50051"
token = sys.argv[2] if len(sys.argv) > 2 else None  # the server's --admin-token
task_row = {"id": "t1", "ground_truth": []}

with EnvironmentClient(target, admin_token=token) as env:
    with env.session(task_row, episode=("rollout-7", 0)) as s:
        s.call_tool("email_send_email", {"recipient": "a@atlas.com", "subject": "s", "body": "b"})
        s.checkpoint()  # optional: a snapshot from the replica holding the session
        try:
            out = s.call_tool("email_search_emails", {"query": "s"})
        except SessionLostError:
            s.recover("checkpoint")  # or s.recover("replay")
            out = s.call_tool("email_search_emails", {"query": "s"})
        print(len(out), "found")

    with env.session(task_row, recovery="replay") as s:  # recovers by itself, once per call
        print(s.verify([]).reward)
