"""The currentOp way of the quiet check, on mongod's answer shape (no mongod here)."""

from mongobench.perftables import quiesce

OWN = {"active": True, "op": "command", "ns": "admin.$cmd", "command": {"currentOp": 1}}
LEFTOVER = {"active": True, "op": "insert", "ns": "mongobench.perftables", "secs_running": 90}
OTHER_DB = {"active": True, "op": "query", "ns": "config.system.sessions"}


class _Admin:
    def __init__(self, answers):
        self.answers = answers

    def command(self, cmd, *args, **kwargs):
        assert "currentOp" in cmd
        return {"inprog": self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]}


class _Client:
    def __init__(self, answers):
        self.admin = _Admin(answers)


def test_waits_until_the_runs_operations_are_gone():
    client = _Client([[OWN, LEFTOVER, OTHER_DB], [OWN, LEFTOVER], [OWN, OTHER_DB]])
    q = quiesce.wait(client, "mongobench", 30.0)
    assert q["by"] == "currentOp" and not q["busy"], q


def test_still_active_at_the_bound_is_busy():
    q = quiesce.wait(_Client([[OWN, LEFTOVER]]), "mongobench", 0.2)
    assert q == {**q, "by": "currentOp", "busy": True, "left": 1}
    assert "1 operations of this run still active" in quiesce.line(q, 0.2, "x/1")


def test_an_empty_currentop_says_nothing():
    assert quiesce.run_ops(_Client([[]]), "mongobench") is None  # FerretDB's answer
