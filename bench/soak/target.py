#!/usr/bin/env python3
"""bench/soak/target.py PORT: the soak's target server, one per route (inside the last jump
host's network namespace, or beside kharond for the direct route).

One line says what the client wants:
- `rr N`: N bytes back, then close (a kubectl-like request/response);
- `bulk N`: N bytes back as fast as possible, then close;
- `echo`: every line back as it arrives, until the client closes (a `kubectl get -w`).
"""

import asyncio
import sys

CHUNK = b"x" * 65536


async def serve(reader, writer):
    try:
        line = await reader.readline()
        words = line.split()
        if len(words) == 2 and words[0] in (b"rr", b"bulk"):
            left = int(words[1])
            while left > 0:
                part = CHUNK[: min(left, len(CHUNK))]
                writer.write(part)
                await writer.drain()
                left -= len(part)
        elif words == [b"echo"]:
            while True:
                got = await reader.readline()
                if not got:
                    break
                writer.write(got)
                await writer.drain()
    except (ConnectionError, ValueError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
