"""Average Op Latency is the server's (serverStatus.opLatencies deltas), the client's mean
keeps its own name: variants run against the stand-in, which times its own commands."""

import pytest

from mongobench.perftables import runner as perftables
from mongobench.perftables.request import PerftablesRun
from mongobench.reports import results

pytestmark = pytest.mark.integration

PLAN = {
    "insert_batchsize": (["100"], "writes"),
    "concurrency": (["10, False"], "writes"),
    "query_full": (["1 document by key, cached"], "reads"),
}


@pytest.mark.parametrize("client_path", ["multiplexed", "pymongo"])
def test_average_op_latency_is_server_side_and_plausible(server_uri, tmp_path, client_path):
    for name, (variants, kind) in PLAN.items():
        run = perftables.run(
            PerftablesRun(
                experiments=[name],
                scale="smoke",
                out=str(tmp_path / f"{name}.json"),
                database="mb_srvlat",
                variants=variants,
                os_path="none",
                client_path=client_path,
                processes=2,
            ),
            server_uri,
            log=lambda m: None,
        )
        (res,) = run["results"]
        assert res["status"] == "ok" and not res["errors"], res.get("error")
        delta = {
            k: res["server_after"][k] - res["server_before"][k]
            for k in res["server_after"]
            if k.startswith("oplat_")
        }
        client_ops = sum(res["ops"].values())
        # The server counted at least every operation the client timed (one command each).
        assert delta[f"oplat_{kind}_ops"] >= client_ops > 0, name
        figs = results.figures(res)
        server_ms, client_ms = figs["avg_latency_ms"], figs["client_avg_latency_ms"]
        assert server_ms == pytest.approx(
            delta[f"oplat_{kind}_latency"] / delta[f"oplat_{kind}_ops"] / 1000
        )
        # The server's time is part of the client's round trip: positive, and smaller.
        assert 0 < server_ms < client_ms, (name, server_ms, client_ms)
        assert figs[f"server_{kind}_latency_ms"] == server_ms
        by_metric = {s["metric"]: s for s in results.to_samples(run)}
        md = by_metric["Average Op Latency"]["metadata"]
        assert md["latency_source"] == "server" and md["latency_kind"] == kind
        client = by_metric["Client Average Op Latency"]
        assert client["metadata"]["latency_source"] == "client"
        assert client["value"] == pytest.approx(client_ms)
