"""Testing your own agent with the pytest plugin's fixtures (a server on the embedded sandbox)."""

SEND = '{"recipient": "a@b.com", "subject": "Report", "body": "Attached"}'


def my_agent(session):
    """A stand-in agent: makes its tool calls on the session, returns them."""
    session.call_tool(
        "email_send_email", {"recipient": "a@b.com", "subject": "Report", "body": "Attached"}
    )
    return [("email_send_email", SEND)]


def test_my_agent_sends_the_report(workplace_client):
    task = {"id": "t1", "ground_truth": [{"name": "email_send_email", "arguments": SEND}]}
    with workplace_client.session(task) as s:
        calls = my_agent(s)
        assert s.verify(calls).reward == 1.0
