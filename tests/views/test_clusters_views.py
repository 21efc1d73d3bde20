"""Several clusters: a view's own reads go to the cluster the answer it shows came from."""

from __future__ import annotations

from typing import Any


def test_a_views_reads_name_the_cluster_of_its_answer(show: Any, meta_demo: dict[str, Any]) -> None:
    call = meta_demo["results"]["check_cluster_health"]
    demo = {
        **meta_demo,
        "results": {
            **meta_demo["results"],
            "check_cluster_health": {**call, "arguments": {**call["arguments"], "cluster": "lab"}},
        },
    }
    shown = show(demo, "check_cluster_health")
    shown.view.wait_for_selector("[data-chart=nodes]")
    shown.page.wait_for_function("() => window.toolCalls.length === 3")
    calls = shown.page.evaluate("() => window.toolCalls")
    assert {(c["name"], c["arguments"]["action"], c["arguments"]["cluster"]) for c in calls} == {
        ("cluster", "list_nodes", "lab"),
        ("storage", "list_storage", "lab"),
        ("cluster", "cluster_overview", "lab"),
    }
    plain = show(meta_demo, "check_cluster_health")  # one cluster: the reads are as before, without it
    plain.view.wait_for_selector("[data-chart=nodes]")
    assert all("cluster" not in c["arguments"] for c in plain.page.evaluate("() => window.toolCalls"))
