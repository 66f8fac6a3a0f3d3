"""The store never loses or misreads a run: two runs of a host begun in the same second are two runs,
an incomplete copy never replaces a complete one, a run dated in the future is refused and never
shadows its host's later runs, a batch keeps what is valid and names what it refused, every
failure (a bad time, a full disk, a damaged file) is one line with nothing half-written, readers
need no write access, and every hostile string comes back from the store as it went in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from gpuaccept.cli import main as cli
from gpuaccept.store import db as store_db
from gpuaccept.store import ingest
from gpuaccept.store.db import SCHEMA_VERSION, open_for_reading
from gpuaccept.store.fleet import fleet_from_store
from gpuaccept.store.ingest import add_files
from tests.hostile import NAMES
from tests.test_store import run_document, written


def failed(document: dict, message: str = "gpu_count 1 < 2 (profile h200-8-nvswitch)") -> dict:
    document = json.loads(json.dumps(document))
    document["tests"][0].update(outcome="failed", message=message)
    document["run"]["exit_status"] = 1
    return document


def runs(db: Path) -> list[tuple]:
    with open_for_reading(db) as connection:
        return connection.execute("SELECT host, complete, tests, failed FROM runs ORDER BY host, started_at, failed").fetchall()


def one_line_each(err: str) -> list[str]:
    lines = err.splitlines()
    assert lines and all(line.startswith("gpu-accept: ") for line in lines) and "Traceback" not in err, err
    return lines


# -- what a run is ---------------------------------------------------------------------------------------------


def test_two_runs_of_a_host_begun_in_the_same_second_are_two_runs_and_the_failed_one_fails_the_fleet(tmp_path, capsys):
    """Files written before runs had their own id, with whole seconds: the second run of node0000,
    begun in the same second, failed. The store keeps both, and the fleet does not pass."""
    passed = run_document(0, 0)
    second = failed(run_document(0, 0))
    db = tmp_path / "f.db"
    assert cli(["store", "add", written(tmp_path, "a.json", passed), written(tmp_path, "b.json", second), "--db", str(db)]) == 0
    assert runs(db) == [("node0000", True, 62, 0), ("node0000", True, 62, 1)]
    capsys.readouterr()
    assert cli(["report", "fleet", "--db", str(db)]) == 1
    assert "FAIL node0000" in capsys.readouterr().out


def test_runs_with_their_own_ids_are_told_apart_and_their_starts_kept_to_the_microsecond(tmp_path):
    first, second = run_document(0, 0), failed(run_document(0, 0))
    first["run"].update(id="a" * 32, started_at="2026-10-01T08:00:00.250000+00:00")
    second["run"].update(id="b" * 32, started_at="2026-10-01T08:00:00.750000+00:00")
    db = tmp_path / "f.db"
    report = add_files(db, [written(tmp_path, "a.json", first), written(tmp_path, "b.json", second)], workers=1)
    assert len(report.added) == 2 and not report.problems
    with open_for_reading(db) as connection:
        starts = connection.execute("SELECT own_id, epoch_us(started_at) % 1000000 FROM runs ORDER BY started_at").fetchall()
    assert starts == [("a" * 32, 250000), ("b" * 32, 750000)]
    from gpuaccept.store.fleet import fleet_from_store

    (host,) = fleet_from_store(db)
    assert host.failed == 1  # the later run is the host's latest


def test_an_incomplete_copy_never_replaces_a_complete_run_and_a_complete_one_replaces_an_incomplete(tmp_path):
    whole = run_document(0, 0)
    killed = json.loads(json.dumps(whole))
    killed["complete"] = False
    killed["run"].update(finished_at=None, exit_status=None)
    extra = dict(killed["tests"][-1], id="test_more[x]", nodeid="test_nccl.py::test_more[x]")
    killed["tests"] = whole["tests"] + [extra]  # the journal of a copy holds a test more: still not the finished run
    db = tmp_path / "f.db"
    assert add_files(db, [written(tmp_path, "whole.json", whole)], workers=1).added
    report = add_files(db, [written(tmp_path, "killed.json", killed)], workers=1)
    assert (report.added, report.replaced, report.already) == ([], [], 1)
    assert runs(db) == [("node0000", True, 62, 0)]
    # the other way round: the finished file replaces the killed one
    other = tmp_path / "other.db"
    assert add_files(other, [str(tmp_path / "killed.json")], workers=1).added
    assert add_files(other, [str(tmp_path / "whole.json")], workers=1).replaced
    assert runs(other) == [("node0000", True, 62, 0)]


def test_a_run_dated_in_the_future_is_refused_and_a_later_run_of_its_host_is_its_latest(tmp_path, capsys, monkeypatch):
    future = run_document(0, 0)
    future["run"].update(started_at="2099-01-01T00:00:00+00:00", finished_at="2099-01-01T00:05:00+00:00")
    db = tmp_path / "f.db"
    assert cli(["store", "add", written(tmp_path, "future.json", future), written(tmp_path, "n1.json", run_document(1, 0)),
                "--db", str(db)]) == 2
    (line,) = one_line_each(capsys.readouterr().err)
    assert "future.json: refused: run.started_at 2099-01-01T00:00:00+00:00 is later than now (" in line
    assert [row[0] for row in runs(db)] == ["node0001"]
    # a store that took such a run before it was refused: the run counts as of when it was added
    real_time = ingest.time.time
    monkeypatch.setattr(ingest.time, "time", lambda: 4102444800.0 + 3600)  # the clock of 2100
    assert add_files(db, [str(tmp_path / "future.json")], workers=1).added
    monkeypatch.setattr(ingest.time, "time", real_time)
    later = failed(run_document(0, 0))
    later["run"].update(started_at=ingest.datetime.now(ingest.timezone.utc).isoformat(), finished_at=None)
    assert add_files(db, [written(tmp_path, "later.json", later)], workers=1).added
    from gpuaccept.store.fleet import fleet_from_store

    latest = {host.host: host for host in fleet_from_store(db)}["node0000"]
    assert latest.failed == 1 and latest.path.endswith("later.json")


# -- one store add, many files ------------------------------------------------------------------------------------


def test_one_add_of_copies_and_bad_files_keeps_every_good_run_and_names_each_refused_file(tmp_path, capsys):
    good = run_document(0, 0)
    killed = json.loads(json.dumps(good))
    killed.update(complete=False, tests=good["tests"][:20])
    killed["run"].update(finished_at=None, exit_status=None)
    bad = {
        "no-host.json": {"environment": {"host": "  "}},
        "not-a-time.json": {"run": {"started_at": "yesterday at noon"}},
        "no-zone.json": {"run": {"started_at": "2026-10-01T08:00:00"}},
        "ends-first.json": {"run": {"finished_at": "2026-10-01T07:00:00+00:00"}},
    }
    files = [written(tmp_path, "copy-a.json", good), written(tmp_path, "killed.json", killed), written(tmp_path, "copy-b.json", good)]
    for index, (name, change) in enumerate(bad.items(), start=10):
        document = run_document(index, 0)
        for part, values in change.items():
            document[part].update(values)
        files.append(written(tmp_path, name, document))
    nan = run_document(20, 0)
    nan["tests"][5]["verdict"]["measured"] = float("nan")  # a pass on NaN
    files.append(written(tmp_path, "nan-pass.json", nan))
    too_big = run_document(21, 0)
    too_big["run"]["exit_status"] = 2**40  # the store's column cannot hold it: refused by the store itself
    files.append(written(tmp_path, "too-big.json", too_big))
    files.append(written(tmp_path, "n1.json", run_document(1, 0)))
    files.append(files[0])  # a file named twice
    db = tmp_path / "f.db"
    assert cli(["store", "add", *files, "--db", str(db), "--workers", "1"]) == 2
    out, err = capsys.readouterr()
    lines = one_line_each(err)
    refused = {Path(line.split(": ")[1]).name: line for line in lines}
    assert sorted(refused) == sorted([*bad, "nan-pass.json", "too-big.json"])
    assert "environment.host is empty" in refused["no-host.json"]
    assert "run.started_at 'yesterday at noon' is not a time" in refused["not-a-time.json"]
    assert "has no time zone" in refused["no-zone.json"]
    assert "the run ends before it starts" in refused["ends-first.json"]
    assert "passed with measured value NaN" in refused["nan-pass.json"]
    assert "refused by the store" in refused["too-big.json"]
    assert out.strip().endswith("2 run(s) added, 0 replaced by a fuller file, 2 already in, 0 file(s) unchanged since added, "
                                "6 file(s) could not be read")
    assert runs(db) == [("node0000", True, 62, 0), ("node0001", True, 62, 0)]


def test_a_value_that_is_not_a_finite_number_is_kept_as_text_never_as_a_number(tmp_path):
    document = failed(run_document(0, 0))
    document["tests"][0]["verdict"].update(outcome="failed", measured=float("nan"))
    document["tests"][1]["verdict"].update(measured=float("inf"))
    db = tmp_path / "f.db"
    assert not add_files(db, [written(tmp_path, "r.json", document)], workers=1).problems
    with open_for_reading(db) as connection:
        rows = connection.execute("SELECT measured, measured_text FROM results WHERE measured_text IN ('nan', 'inf')").fetchall()
    assert sorted(rows, key=str) == [(None, "inf"), (None, "nan")]


def test_every_hostile_string_comes_back_from_the_store_as_it_went_in(tmp_path):
    paths = []
    for index, name in enumerate(NAMES):
        document = run_document(index, 0)
        document["environment"].update(host=name, driver=name)
        document["run"]["profile"]["name"] = name
        test = document["tests"][0]
        test.update(id=name, outcome="failed", message=name, nodeid=f"test_x.py::{name}")
        test["verdict"].update(subject=name, unit=name, expected=name, measured=name)
        paths.append(written(tmp_path, f"h{index}.json", document))
    db = tmp_path / "f.db"
    report = add_files(db, paths, workers=1)
    assert not report.problems and len(report.added) == len(NAMES)
    with open_for_reading(db) as connection:
        got = connection.execute(
            "SELECT r.host, r.driver, r.profile, x.test_id, x.message, x.subject, x.unit, x.expected, x.measured_text "
            "FROM runs r JOIN results x USING (run_id) WHERE x.outcome = 'failed'"
        ).fetchall()
    assert sorted(got) == sorted((name,) * 9 for name in NAMES)


# -- nothing half-written, one line --------------------------------------------------------------------------------


def in_a_mount_namespace(script: str, **variables: str) -> subprocess.CompletedProcess:
    """`script` (sh) where it may mount a filesystem of its own (a tmpfs at $MNT) that nothing else
    sees and that goes with it. A machine that allows no mount namespace skips outside CI."""
    for unshare in (["unshare", "-m"], ["unshare", "-rm"]):
        if shutil.which(unshare[0]) is None:
            break
        probe = subprocess.run([*unshare, "sh", "-c", 'mount -t tmpfs tmpfs "$MNT"'], env={**os.environ, **variables},
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return subprocess.run([*unshare, "sh", "-c", script], env={**os.environ, **variables}, capture_output=True, text=True,
                                  timeout=300)
    if os.environ.get("CI"):
        pytest.fail("a filesystem of the test's own needs a mount namespace (unshare -m, as root, or unshare -rm)")
    pytest.skip("no mount namespace here (unshare -m as root, or unshare -rm)")


@pytest.mark.slow
def test_a_full_disk_is_one_line_and_the_store_keeps_every_run_it_had_whole(tmp_path):
    before = [written(tmp_path, f"a{index}.json", run_document(index, 0, gpus=8)) for index in range(4)]
    after = [written(tmp_path, f"b{index}.json", run_document(index, 1, gpus=8)) for index in range(4, 40)]
    store = tmp_path / "f.db"
    assert not add_files(store, before, workers=1).problems
    size_kib = store.stat().st_size // 1024 + 64  # room for a few runs more, not for 36
    mnt = tmp_path / "small"
    mnt.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    done = in_a_mount_namespace(
        f'mount -t tmpfs -o size={size_kib}k tmpfs "$MNT" && cp "$STORE" "$MNT/" && '
        f'"$PYTHON" -m gpuaccept store add {" ".join(after)} --db "$MNT/f.db" --workers 1; echo "exit $?"; cp "$MNT"/f.db* "$OUT"/',
        MNT=str(mnt), STORE=str(store), OUT=str(out), PYTHON=sys.executable,
    )
    assert done.stdout.strip().splitlines()[-1] == "exit 2", done.stdout + done.stderr
    (line,) = one_line_each(done.stderr)
    assert "cannot write the store" in line and "No space left on device" in line, line
    with open_for_reading(out / "f.db") as connection:
        per_run = connection.execute("SELECT r.host, r.tests, count(*) FROM runs r JOIN results USING (run_id) GROUP BY ALL").fetchall()
    assert len(per_run) >= 4 and all(tests == rows for _, tests, rows in per_run)  # every run in it whole
    assert {host for host, _, _ in per_run} >= {f"node{index:04d}" for index in range(4)}


@pytest.mark.slow
def test_a_store_on_a_read_only_filesystem_is_read_and_written_to_in_one_line(tmp_path):
    store = tmp_path / "f.db"
    assert not add_files(store, [written(tmp_path, "n0.json", failed(run_document(0, 0)))], workers=1).problems
    (tmp_path / "f.db.lock").unlink()  # a copy of the store, without its lock file
    mnt = tmp_path / "ro"
    mnt.mkdir()
    done = in_a_mount_namespace(
        'mount -t tmpfs tmpfs "$MNT" && cp "$STORE" "$MNT/" && mount -o remount,ro "$MNT" && '
        '"$PYTHON" -m gpuaccept report fleet --db "$MNT/f.db" --html "$PAGE"; echo "exit $?"; '
        '"$PYTHON" -m gpuaccept store info --db "$MNT/f.db"; echo "exit $?"; '
        '"$PYTHON" -m gpuaccept store add "$RESULTS" --db "$MNT/f.db"; echo "exit $?"',
        MNT=str(mnt), STORE=str(store), PYTHON=sys.executable, PAGE=str(tmp_path / "fleet.html"), RESULTS=str(tmp_path / "n0.json"),
    )
    said = done.stdout.splitlines()
    assert [line for line in said if line.startswith("exit ")] == ["exit 1", "exit 0", "exit 2"], done.stdout + done.stderr
    assert any(line.startswith("FAIL node0000") for line in said) and (tmp_path / "fleet.html").is_file()
    (line,) = one_line_each(done.stderr)
    assert "cannot lock the store" in line and "Read-only file system" in line


def test_a_reader_opens_nothing_for_writing(tmp_path, monkeypatch):
    """Another user, who may read the store but not write it: the lock is opened only to read, the
    database read-only."""
    db = tmp_path / "f.db"
    add_files(db, [written(tmp_path, "n0.json", run_document(0, 0))], workers=1)
    opened, connected = [], []
    real_open, real_connect = os.open, duckdb.connect
    monkeypatch.setattr(store_db.os, "open", lambda path, flags, *rest: opened.append((str(path), flags)) or real_open(path, flags, *rest))
    monkeypatch.setattr(store_db.duckdb, "connect", lambda path, **options: connected.append(options) or real_connect(path, **options))
    assert cli(["report", "fleet", "--db", str(db)]) == 0
    assert cli(["report", "history", "--db", str(db)]) == 0
    assert cli(["store", "info", "--db", str(db)]) == 0
    assert opened and all(flags & (os.O_WRONLY | os.O_RDWR) == 0 for _, flags in opened), opened
    assert connected and all(options.get("read_only") for options in connected)


@pytest.mark.parametrize("where", [0, 4096, 12288])  # the header, and the first blocks every query reads
def test_a_damaged_store_is_one_line_exit_2_for_every_command(tmp_path, capsys, where):
    db = tmp_path / "f.db"
    add_files(db, [written(tmp_path, "n0.json", run_document(0, 0))], workers=1)
    with open(db, "r+b") as damaged:
        damaged.seek(where)
        damaged.write(b"\xff" * 5000)
    capsys.readouterr()
    for command in (["report", "fleet", "--db", str(db)], ["report", "history", "--db", str(db)], ["store", "info", "--db", str(db)],
                    ["store", "add", str(tmp_path / "n0.json"), "--db", str(db)]):
        assert cli(command) == 2, command
        (line,) = one_line_each(capsys.readouterr().err)
        assert str(db) in line


def test_a_store_of_version_1_is_read_as_it_is_and_migrated_by_the_next_add(tmp_path):
    paths = [written(tmp_path, f"n{index}.json", run_document(index, 0)) for index in range(3)]
    db = tmp_path / "old.db"
    add_files(db, paths[:2], workers=1)
    connection = duckdb.connect(str(db))  # as a gpu-accept of before left it: version 1
    for column in ("run_key", "own_id", "content_sha256", "stopped", "nodes"):
        connection.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    connection.execute("UPDATE schema_version SET version = 1")
    connection.close()
    assert [row[0] for row in runs(db)] == ["node0000", "node0001"]  # read as it is, by a reader who may not write it
    assert [(h.host, h.stopped) for h in fleet_from_store(db)] == [("node0000", ()), ("node0001", ())]  # no `stopped` column yet
    copy = written(tmp_path, "copy-of-n0.json", json.loads(Path(paths[0]).read_text()))
    report = add_files(db, [*paths, copy], workers=1)  # migrated; the runs known by their keys
    assert (len(report.added), report.already, report.unchanged) == (1, 1, 2)
    with open_for_reading(db) as connection:
        assert connection.execute("SELECT max(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION == 4
        assert connection.execute("SELECT count(*) FROM runs WHERE run_key = run_id").fetchone()[0] == 3


def test_a_store_of_version_3_is_read_as_it_is_and_takes_a_clusters_run_once_migrated(tmp_path, capsys):
    from gpuaccept.checks.cluster import cluster_verdicts
    from gpuaccept.profile import load_profile
    from tests.test_cluster_network import PROFILE, TREE, cluster_record, node, three_nodes_one_slow

    db = tmp_path / "v3.db"
    add_files(db, [written(tmp_path, f"n{index}.json", run_document(index, 0)) for index in range(2)], workers=1)
    connection = duckdb.connect(str(db))  # as a gpu-accept of before left it: version 3, no cluster's nodes
    connection.execute("ALTER TABLE runs DROP COLUMN nodes")
    connection.execute("UPDATE schema_version SET version = 3")
    connection.close()
    capsys.readouterr()
    assert cli(["store", "info", "--db", str(db)]) == 0  # read as it is
    assert ": schema version 4, 2 run(s) of 2 host(s), " in capsys.readouterr().out
    (tmp_path / "two-rails.yaml").write_text(PROFILE, encoding="utf-8")
    profile = load_profile(tmp_path / "two-rails.yaml")
    facts = three_nodes_one_slow(profile, [node(TREE, index=i) for i in range(3)], slow=1)
    cluster = tmp_path / "cluster-results.json"
    cluster.write_text(cluster_record(facts, cluster_verdicts(profile, facts), name="rack-a").to_json(), encoding="utf-8")
    assert cli(["store", "add", str(cluster), "--db", str(db)]) == 0  # migrated by the add
    assert cli(["store", "info", "--db", str(db)]) == 0
    assert ": schema version 4, 3 run(s) of 2 host(s) and 1 cluster(s), " in capsys.readouterr().out
    with open_for_reading(db) as connection:
        assert connection.execute("SELECT max(version) FROM schema_version").fetchone()[0] == 4
        assert connection.execute("SELECT host, nodes FROM runs ORDER BY host").fetchall() == [
            ("node0000", None), ("node0001", None), ("rack-a", "\n".join(n.host for n in facts.nodes)),
        ]
    # a node's own record of its part (node-results.json) is its host's run, not a cluster's
    from gpuaccept.checks.cluster import node_verdicts
    from gpuaccept.cluster.reports import finished, started

    own = facts.model_copy(update={"nodes": [facts.nodes[0]], "collectives": [], "localization": None})
    mine = cluster_record(facts, []).run.model_copy(update={"started_at": "2026-11-28T00:00:01.000000+00:00"})
    part = finished(started(mine, own.nodes[0].host, own, own.nodes[0].host), node_verdicts(profile, own.nodes[0], 2))
    node_file = tmp_path / "node-results.json"
    node_file.write_text(part.to_json(), encoding="utf-8")
    assert cli(["store", "add", str(node_file), "--db", str(db)]) == 0
    capsys.readouterr()
    assert cli(["store", "info", "--db", str(db)]) == 0
    assert ": schema version 4, 4 run(s) of 3 host(s) and 1 cluster(s), " in capsys.readouterr().out
