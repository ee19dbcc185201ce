"""LangGraph's human-in-the-loop cycle, the comparison for the decision bench.

propose -> interrupt() -> Command(resume=...) -> record, on LangGraph's
SqliteSaver over a WAL file with synchronous=FULL: the same durability as
thestream's store. Prints the median of a whole cycle (both invocations,
each committing its checkpoints) and of one raw fsync'd INSERT transaction
on a file in the same folder, so the two runs can be compared by ratio.

Run it beside `cargo bench -p stream-memory --bench materialize`, in the
same session (it is not part of the test suite and needs packages from
PyPI):

    python3 -m venv /tmp/lg && /tmp/lg/bin/pip install langgraph langgraph-checkpoint-sqlite
    /tmp/lg/bin/python crates/stream-memory/benches/langgraph_cycle.py [ROUNDS]
"""

import os
import sqlite3
import statistics
import sys
import tempfile
import time
from typing import Optional, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt


class State(TypedDict):
    proposal: dict
    decision: Optional[dict]
    judgment: Optional[dict]


def propose(state: State) -> dict:
    return {"proposal": state["proposal"]}


def review(state: State) -> dict:
    # The human sees the proposal and answers; the graph waits here.
    return {"decision": interrupt({"proposal": state["proposal"]})}


def record(state: State) -> dict:
    return {"judgment": {"proposal": state["proposal"], "decision": state["decision"]}}


WARM_UP_COMMITS = 1500
WARM_UP_CYCLES = 100


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def raw_transactions(path: str, rounds: int) -> list:
    conn = connect(path)
    conn.isolation_level = None
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, x BLOB)")
    out = []
    # Untimed first: past the WAL's first checkpoint, as a store in use is
    # (until then each commit also grows the file and fsyncs its size).
    for i in range(WARM_UP_COMMITS + rounds):
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (i % 120, os.urandom(64)))
        conn.execute("COMMIT")
        if i >= WARM_UP_COMMITS:
            out.append(time.perf_counter() - start)
    return out


def cycles(path: str, rounds: int) -> list:
    builder = StateGraph(State)
    builder.add_node("propose", propose)
    builder.add_node("review", review)
    builder.add_node("record", record)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", "review")
    builder.add_edge("review", "record")
    builder.add_edge("record", END)
    saver = SqliteSaver(connect(path))
    saver.setup()
    graph = builder.compile(checkpointer=saver)
    out = []
    # The first cycles are untimed, for the same reason as the raw commits.
    for i in range(WARM_UP_CYCLES + rounds):
        config = {"configurable": {"thread_id": f"proposal-{i}"}}
        proposal = {
            "kind": "self-correction",
            "target": f"{i:064x}",
            "text": "a corrected reply " * 20,
        }
        start = time.perf_counter()
        graph.invoke({"proposal": proposal, "decision": None, "judgment": None}, config)
        done = graph.invoke(Command(resume={"disposition": "accept"}), config)
        if i >= WARM_UP_CYCLES:
            out.append(time.perf_counter() - start)
        assert done["judgment"]["decision"] == {"disposition": "accept"}
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as folder:
        raw = statistics.median(raw_transactions(os.path.join(folder, "raw.db"), rounds))
        cycle = statistics.median(cycles(os.path.join(folder, "graph.db"), rounds))
    print(f"LangGraph SqliteSaver, WAL + synchronous=FULL, {rounds} rounds")
    print(f"raw fsync'd INSERT transaction       median {raw * 1e3:8.2f} ms")
    print(
        f"propose -> interrupt -> resume -> record median {cycle * 1e3:8.2f} ms"
        f"  ratio to raw {cycle / raw:5.1f}"
    )


if __name__ == "__main__":
    main()
