"""Who performs an operation: a user and the groups they belong to."""

from __future__ import annotations

import getpass
import grp
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """`superuser` passes every ACE (Kafka's `super.users`): the web console's
    administrators act with it. `read_only` is refused every change, whatever the ACEs
    and `superuser` say (`Cluster.check_may_change`; docs/WEB.md, "Read-only")."""

    user: str
    groups: tuple[str, ...] = ()
    superuser: bool = False
    read_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.user, str) or not self.user:
            raise ValueError("a principal needs a non-empty user name")
        object.__setattr__(self, "groups", tuple(self.groups))

    @classmethod
    def current(cls) -> Principal:
        """The operating-system user running this process, with their groups."""
        try:
            user = getpass.getuser()
        except Exception:  # no login name (some containers): fall back to the uid
            user = str(os.getuid())
        names = []
        for gid in os.getgroups():
            try:
                names.append(grp.getgrgid(gid).gr_name)
            except KeyError:
                names.append(str(gid))
        return cls(user, tuple(sorted(set(names))))

    def __str__(self) -> str:
        return self.user
