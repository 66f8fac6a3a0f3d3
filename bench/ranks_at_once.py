"""Processes started together and given one go, for the benches that time what ranks pay to set up
(bench/context_visibility.py, bench/context_creation.py).

Each process runs Python code that imports what it needs (untimed), then `WAIT_FOR_GO`: it reads
its answer file (`out`) and the go file from its first two arguments, says it is ready and waits for
the go, whose file holds the moment it was given (`went`, time.time()); then what it times. It ends
by writing its answer, a JSON object, to its answer file.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

WAIT_FOR_GO = r'''
import json, os, sys, time
out, go = sys.argv[1], sys.argv[2]
open(out + ".ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
went = float(open(go).read())
'''


# a rank's set-up, timed into `parts` (after WAIT_FOR_GO, torch and torch.distributed imported as
# dist; its arguments rank, world size and device): its CUDA context (set_device, a first tensor),
# then, in a world of more than one, its process group and communicator (a barrier makes it)
TIMED_SET_UP = r'''
rank, world, device = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
parts = {}
began = time.time()
torch.cuda.set_device(device)
torch.zeros(1, device=device)
torch.cuda.synchronize()
parts["context"] = time.time() - began
began = time.time()
if world > 1:
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", device))
    dist.barrier()
    torch.cuda.synchronize()
parts["group"] = time.time() - began
'''


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_at_one_go(processes: list[tuple[str, list[str], dict[str, str]]], work: Path, timeout_s: float = 300) -> list[dict]:
    """Each of `processes` (its code, with WAIT_FOR_GO after its imports; its arguments after the
    answer and go files, from sys.argv[3]; its environment) started, all given one go once every one
    is ready: their answers, in order."""
    go = work / "go"
    go.unlink(missing_ok=True)
    started = []
    for number, (code, arguments, env) in enumerate(processes):
        out = work / f"process{number}.json"
        out.unlink(missing_ok=True)
        started.append((subprocess.Popen([sys.executable, "-c", code, str(out), str(go), *arguments], env=env), out))
    while not all(Path(f"{out}.ready").exists() for _, out in started):
        ended = [process.returncode for process, out in started if process.poll() is not None and not Path(f"{out}.ready").exists()]
        if ended:  # it never got as far as waiting for the go (its import failed): the go would never come
            for process, _ in started:
                process.kill()
                process.wait()
            raise RuntimeError(f"a process exited with {ended[0]} before it was ready")
        time.sleep(0.01)
    given = work / "go.tmp"
    given.write_text(repr(time.time()))
    given.rename(go)  # whole, at once: a process never reads it half written
    for process, _ in started:
        if process.wait(timeout=timeout_s) != 0:
            raise RuntimeError(f"a process exited with {process.returncode}")
    answers = [json.loads(out.read_text()) for _, out in started]
    for _, out in started:
        Path(f"{out}.ready").unlink()
    return answers
