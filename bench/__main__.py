"""`python -m bench`: the same command as `plet bench`."""

from __future__ import annotations

from bench.command import bench_command

if __name__ == "__main__":
    bench_command(prog_name="python -m bench")
