"""The pytest plugin works in a user's project: fixtures give a live server and client."""

from __future__ import annotations

pytest_plugins = ["pytester"]

USER_TEST = """
import json

def test_agent_against_real_environment(workplace_client):
    task = {"id": "t1", "ground_truth": [{"name": "email_send_email", "arguments": json.dumps(
        {"recipient": "a@b.com", "subject": "Hi", "body": "Hello"})}]}
    with workplace_client.session(task) as s:
        assert s.call_tool("email_send_email", {"recipient": "a@b.com", "subject": "Hi",
                                                "body": "Hello"}) == "Email sent successfully."
        assert s.verify([("email_send_email", {"recipient": "a@b.com", "subject": "Hi",
                                               "body": "Hello"})]).reward == 1.0
        assert s.verify([]).reward == 0.0

def test_tools_are_listed(workplace_client, workplace_server):
    assert len(workplace_client.list_tools()) == 27
    assert workplace_server.store.live_count() == 0
"""


def test_plugin_fixtures_in_a_user_project(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_subprocess("-q")  # the plugin loads by its entry point
    result.assert_outcomes(passed=2)
