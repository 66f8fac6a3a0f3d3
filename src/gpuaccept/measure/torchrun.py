"""torchrun, run in this process, so that its outcome is one of our exit codes.

`gpu-accept torchrun [torchrun options] -- [cluster options]` is torchrun itself (the engine the
cluster already runs: c10d rendezvous, one agent a node, its restarts and signals), started through
torch's own `torch.distributed.run.run` with `-m gpuaccept cluster ...` as the program of every
rank. What plain torchrun cannot say, this does:

- A node that never joins ends torchrun's rendezvous with RendezvousTimeoutError and exit 1, as if
  a check had failed; here it is one line naming the endpoint, the job id and the wait, exit 2.
- torchrun exits 1 whichever way its ranks failed; here the ranks' own codes come through: 1 when a
  check failed, 2 when a rank could not judge or died (a signal, an exception).
- The rendezvous waits `cluster.rendezvous_s` for the nodes unless `--rdzv-conf join_timeout=` says
  otherwise (torchrun's own default is 600 s).
"""

from __future__ import annotations

import sys

from gpuaccept.errors import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE, GpuAcceptError


class TorchrunError(GpuAcceptError):
    """torchrun could not start the job or its nodes never all met."""


def with_join_timeout(torchrun_args: list[str], join_timeout_s: float) -> list[str]:
    """The options with `join_timeout` added to `--rdzv-conf` when no join_timeout is given."""
    args = list(torchrun_args)
    for index, arg in enumerate(args):
        if arg.startswith(("--rdzv-conf=", "--rdzv_conf=")):
            name, _, value = arg.partition("=")
            if "join_timeout" not in value:
                args[index] = f"{name}={','.join(filter(None, [value, f'join_timeout={int(join_timeout_s)}']))}"
            return args
        if arg in ("--rdzv-conf", "--rdzv_conf") and index + 1 < len(args):
            if "join_timeout" not in args[index + 1]:
                args[index + 1] = f"{args[index + 1]},join_timeout={int(join_timeout_s)}"
            return args
    return [*args, "--rdzv-conf", f"join_timeout={int(join_timeout_s)}"]


def exit_code_of_ranks(codes: list[int]) -> int:
    """The job's exit code from its failed ranks' codes: 1 only when every failed rank said a check failed."""
    if not codes:
        return EXIT_OK
    return EXIT_CHECK_FAILED if all(code == EXIT_CHECK_FAILED for code in codes) else EXIT_USAGE


def run_torchrun(torchrun_args: list[str], program: list[str]) -> int:
    """torchrun with these options running `python -m <program...>` on every rank; our exit code."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousError
    from torch.distributed.run import get_args_parser, run

    parser = get_args_parser()

    def refuse(message: str):
        raise TorchrunError(f"torchrun options: {message} (see torchrun --help)")

    parser.error = refuse  # type: ignore[method-assign]  # one line, as every error of ours
    args = parser.parse_args([*torchrun_args, "-m", *program])
    where = f"rendezvous {args.rdzv_backend} at {args.rdzv_endpoint or 'localhost'} (id {args.rdzv_id})"
    try:
        run(args)
    except (ValueError, AssertionError) as error:
        # torchrun checks some options only as it starts (--nnodes abc, --nproc-per-node 0, an
        # endpoint or backend it cannot use), with a bare exception: before any rank ran
        said = str(error).strip().splitlines()[0] if str(error).strip() else "an option it could not use"
        raise TorchrunError(f"torchrun options: {said} ({type(error).__name__}; see torchrun --help)") from None
    except ChildFailedError as failed:
        codes = [failure.exitcode for failure in failed.failures.values()]
        ranks = ", ".join(f"rank {rank} exit {failure.exitcode}" for rank, failure in sorted(failed.failures.items()))
        print(f"gpu-accept: torchrun on this node: {ranks}", file=sys.stderr)
        return exit_code_of_ranks(codes)
    except RendezvousError as error:
        said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        waited = next((item.split("=", 1)[1] for item in args.rdzv_conf.split(",") if item.startswith("join_timeout=")), "600")
        raise TorchrunError(f"{where}: not all of --nnodes {args.nnodes} joined within {waited} s ({said})") from None
    return EXIT_OK
