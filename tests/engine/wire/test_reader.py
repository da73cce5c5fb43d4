"""The listener's reads (engine.wire.reader.FrameReader) over real loopback sockets: reads
larger than its buffer land in buffers of their own, smaller ones come from the buffer,
a full buffer stops the socket being read until a read takes from it, and a connection
that ends mid-read says so."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from engine.wire.reader import FrameReader


async def _serve(handler, buffer_bytes: int = 1024):
    """A server whose connections each run `handler(reader, writer)`; returns it, its
    port and a future of the handler's result."""
    loop = asyncio.get_running_loop()
    result: asyncio.Future = loop.create_future()

    async def on_connected(reader: FrameReader, writer: asyncio.StreamWriter) -> None:
        try:
            result.set_result(await handler(reader, writer))
        except BaseException as exc:  # handed to the test
            result.set_exception(exc)
        finally:
            writer.close()

    server = await loop.create_server(
        lambda: FrameReader(on_connected, buffer_bytes), "127.0.0.1", 0
    )
    return server, server.sockets[0].getsockname()[1], result


def _framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


async def _read_frames(reader: FrameReader, count: int) -> list[bytes | bytearray]:
    frames = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        frames.append(await reader.readexactly(size))
    return frames


def test_a_large_read_lands_whole_and_the_small_ones_around_it_stay_in_order() -> None:
    large, small = os.urandom(100_000), b"after"

    async def main() -> list[bytes | bytearray]:
        server, port, result = await _serve(lambda r, w: _read_frames(r, 3))
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            stream = _framed(b"before") + _framed(large) + _framed(small)
            for i in range(0, len(stream), 777):  # in pieces that straddle the frames
                writer.write(stream[i : i + 777])
                await writer.drain()
            frames = await asyncio.wait_for(result, 10)
            writer.close()
            return frames

    before, got_large, after = asyncio.run(main())
    assert (before, after) == (b"before", b"after")
    assert type(got_large) is bytearray and got_large == large  # its own buffer, not a copy
    assert type(before) is bytes


def test_a_full_buffer_stops_reading_the_socket_until_a_read_takes_from_it() -> None:
    """And writing goes on meanwhile."""
    frames = [os.urandom(200) for _ in range(50)]  # 10 KB, ten times the 1 KiB buffer

    async def handler(reader: FrameReader, writer: asyncio.StreamWriter):
        # the client sends all of it at once: the buffer fills and the socket is left alone
        deadline = asyncio.get_running_loop().time() + 10
        while writer.transport.is_reading() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        paused = not writer.transport.is_reading()
        # the socket's reading paused is not its writing paused: an answer drains
        writer.write(b"answer")
        await asyncio.wait_for(writer.drain(), 5)
        got = await _read_frames(reader, len(frames))
        return paused, got, writer.transport.is_reading()

    async def main():
        server, port, result = await _serve(handler)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"".join(_framed(f) for f in frames))
            await writer.drain()
            out = await asyncio.wait_for(result, 10)
            writer.close()
            return out

    paused, got, reading_after = asyncio.run(main())
    assert paused
    assert got == frames
    assert reading_after


@pytest.mark.parametrize("size", [500, 50_000])  # from the buffer; in a buffer of its own
def test_a_connection_that_ends_mid_read_raises_incomplete_read(size: int) -> None:
    async def handler(reader: FrameReader, writer: asyncio.StreamWriter):
        (declared,) = struct.unpack(">i", await reader.readexactly(4))
        with pytest.raises(asyncio.IncompleteReadError) as caught:
            await reader.readexactly(declared)
        return caught.value.partial, caught.value.expected, reader.at_eof()

    async def main():
        server, port, result = await _serve(handler)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(struct.pack(">i", size) + b"x" * 300)
            await writer.drain()
            writer.close()
            return await asyncio.wait_for(result, 10)

    partial, expected, at_eof = asyncio.run(main())
    assert (partial, expected, at_eof) == (b"x" * 300, size, True)


def test_answers_are_written_while_requests_are_read() -> None:
    """The protocol is the writer's too: a writer drains (flow control) while reads go
    on, and the client gets every answer."""

    async def handler(reader: FrameReader, writer: asyncio.StreamWriter):
        for _ in range(20):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            writer.write(_framed(bytes(body[:8]) * 40_000))  # 320 KB answers
            await writer.drain()
        return True

    async def main():
        server, port, result = await _serve(handler)
        async with server:
            client_reader, writer = await asyncio.open_connection("127.0.0.1", port)
            bodies = [os.urandom(3000) for _ in range(20)]
            writer.write(b"".join(_framed(b) for b in bodies))
            await writer.drain()
            answers = []
            for _ in bodies:
                (size,) = struct.unpack(">i", await client_reader.readexactly(4))
                answers.append(await client_reader.readexactly(size))
            assert await asyncio.wait_for(result, 10)
            writer.close()
            return bodies, answers

    bodies, answers = asyncio.run(main())
    assert answers == [b[:8] * 40_000 for b in bodies]
