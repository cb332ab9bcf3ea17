"""Client-side session affinity over several replicas (no proxy): each session's RPCs reach
the replica that holds it, by a ring hash of the ``x-resources-session-id`` header."""

import sys

from workplace_env_client import EnvironmentClient

replicas = sys.argv[1:] or ["10.0.0.11:50051", "10.0.0.12:50051", "10.0.0.13:50051"]
task_row = {"id": "t1", "ground_truth": []}

with EnvironmentClient(replicas) as env:  # a list of IP:PORT turns affinity on
    for rollout in ("rollout-7", "rollout-8", "rollout-9"):
        with env.session(task_row, episode=(rollout, 0)) as s:
            s.call_tool("email_search_emails", {"query": "budget"})
            print(rollout, s.verify([]).reward)

# A DNS name (e.g. a Kubernetes headless Service resolving to every ready pod) needs the flag:
# EnvironmentClient("dns:///workplace-env-replicas.default.svc.cluster.local:50051", affinity=True)
