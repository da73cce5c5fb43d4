# The compiled module's signature (engine/storage/_columns.pyx), for the type checker.

def encode_lists(
    values: list[bytes | None],
    timestamps: list[int],
    keys: list[bytes | None] | None,
    headers: bytes | None,
    version: int,
    f_keys: int,
    f_headers: int,
    f_ts64: int,
) -> bytes: ...
def all_none(items: list[object]) -> bool: ...
def span(stamps: list[int]) -> tuple[int, int]: ...
