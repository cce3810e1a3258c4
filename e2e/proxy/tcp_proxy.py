#!/usr/bin/env python3
"""A round-robin TCP proxy: what a Service (kube-proxy) does for the tests.

    tcp_proxy.py --listen 127.0.0.1:PORT --backends FILE [--state FILE] [--block-file FILE]

FILE lists the backends, one host:port per line; it is read again whenever it
changes (a test replaces a restarted replica's port there, as a Service's
endpoints follow the pods).

Each accepted connection goes to the next backend in turn; a backend that
refuses the connection (its process is gone) is skipped for the next one, as
a Service drops an endpoint that is not ready. Bytes pass through untouched
(TLS and client certificates end at the backend). Connections are counted per
backend in --state (JSON, rewritten on every change), so a test can tell that
both replicas served. While --block-file exists the proxy is a black hole, as
a network partition is: open connections stay open but no byte passes either
way, new ones are accepted and held; when the file goes, bytes flow again. Test infrastructure only: never part of the product.
"""
import argparse
import asyncio
import json
import os
import signal


def endpoint(text):
    host, _, port = text.rpartition(":")
    return host, int(port)


class Proxy:
    def __init__(self, backends_file, state, block_file=""):
        self.block_file = block_file
        self.backends_file = backends_file
        self.stamp = None
        self.backends = []
        self.state = state
        self.next = 0
        self.counts = {}
        self.refused = {}
        self.reload()

    def reload(self):
        try:
            st = os.stat(self.backends_file)
        except OSError:
            return
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if stamp == self.stamp:
            return
        self.stamp = stamp
        with open(self.backends_file, encoding="utf-8") as f:
            self.backends = [endpoint(line.strip()) for line in f if line.strip()]
        for h, p in self.backends:
            self.counts.setdefault(f"{h}:{p}", 0)
            self.refused.setdefault(f"{h}:{p}", 0)

    def save(self):
        if not self.state:
            return
        tmp = self.state + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"connections": self.counts, "refused": self.refused}, f)
        os.replace(tmp, self.state)

    async def held(self):
        while self.block_file and os.path.exists(self.block_file):
            await asyncio.sleep(0.05)

    async def pipe(self, reader, writer):
        try:
            while data := await reader.read(65536):
                await self.held()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def handle(self, client_reader, client_writer):
        await self.held()
        self.reload()
        upstream = None
        for _ in range(len(self.backends)):
            host, port = self.backends[self.next % len(self.backends)]
            self.next += 1
            try:
                upstream = await asyncio.open_connection(host, port)
                self.counts[f"{host}:{port}"] += 1
                break
            except OSError:
                self.refused[f"{host}:{port}"] += 1
        self.save()
        if upstream is None:
            client_writer.close()
            return
        up_reader, up_writer = upstream
        await asyncio.gather(self.pipe(client_reader, up_writer), self.pipe(up_reader, client_writer))


async def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", required=True, type=endpoint)
    parser.add_argument("--backends", required=True)
    parser.add_argument("--state", default="")
    parser.add_argument("--block-file", default="")
    args = parser.parse_args()
    proxy = Proxy(args.backends, args.state, args.block_file)
    proxy.save()
    server = await asyncio.start_server(proxy.handle, args.listen[0], args.listen[1])
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
