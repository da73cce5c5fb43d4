"""A replay's progress, 0 to 1, that never goes back (nothing here imports pyspark).

A replay runs a few steps its kind names in advance (`replays.STEPS`: a copy reads its range,
then writes it); each step is an equal part of the bar. Spark adds stages to a step as it
goes (adaptive execution submits a shuffle's next stage only when the one before has ended),
so the share of a step's tasks that are done can fall: the step's part of the bar then
holds until that share passes its old mark, and stops short of the step's end (STEP_END)
until the next step begins, since more stages may come.

    progress = Progress(("reading", "writing"))
    progress.update({0: (2, 4)})   # stage id -> (tasks done, tasks) as Spark reports them
    progress.begin(1)              # the kind starts its second step
    progress.value                 # 0.5 ...

Only the thread that calls `update` and `begin` (under its own lock) uses an instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

STEP_END = 0.95  # of a step's part, the most its tasks fill before the next step begins


class Progress:
    def __init__(self, steps: Sequence[str] = ("running",)) -> None:
        self.steps = tuple(steps) or ("running",)
        self.step = 0  # index of the step running
        self._of_step: dict[int, int] = {}  # stage id -> the step it was first seen in
        self._step_mark = 0.0  # the running step's filled share (0..STEP_END)
        self.value = 0.0

    def begin(self, step: int) -> None:
        """The kind starts step `step` (0-based): the steps before it are full."""
        if step > self.step:
            self.step = min(step, len(self.steps) - 1)
            self._step_mark = 0.0
            self._raise((self.step + 0.0) / len(self.steps))

    def update(self, stages: Mapping[int, tuple[int, int]]) -> float:
        """Take Spark's stages of the replay so far (stage id -> (tasks done, tasks));
        returns the progress."""
        done = total = 0
        for stage_id, (d, t) in stages.items():
            if self._of_step.setdefault(stage_id, self.step) == self.step:
                done, total = done + d, total + t
        if total:
            self._step_mark = max(self._step_mark, STEP_END * done / total)
        return self._raise((self.step + self._step_mark) / len(self.steps))

    def finish(self) -> float:
        """The replay ended well: the bar is full."""
        return self._raise(1.0)

    @property
    def label(self) -> str:
        """The running step for people: "step 2 of 2: writing"."""
        return f"step {self.step + 1} of {len(self.steps)}: {self.steps[self.step]}"

    def _raise(self, value: float) -> float:
        self.value = max(self.value, min(value, 1.0))
        return self.value
