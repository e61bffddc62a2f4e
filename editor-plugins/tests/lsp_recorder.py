"""Runs a language server and records its traffic: every message either way, one JSON line
each (`{"to_server": ...}` or `{"from_server": ...}`) in a log, passed through unchanged. The
editor tests put it between an editor and the real `redraft lsp` to learn exactly what the
server answered (its next edit), which they then check the editor showed and applied.

    python lsp_recorder.py --log LOG.jsonl -- /path/to/redraft lsp

Standard library only.
"""

import argparse
import json
import subprocess
import sys
import threading

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
parser.add_argument("command", nargs=argparse.REMAINDER)
args = parser.parse_args()
command = args.command[1:] if args.command[:1] == ["--"] else args.command

log_lock = threading.Lock()


def record(direction, body):
    try:
        message = json.loads(body)
    except ValueError:
        message = {"unparsed": body.decode(errors="replace")}
    with log_lock, open(args.log, "a", encoding="utf-8") as log:
        log.write(json.dumps({direction: message}) + "\n")


def pump(source, sink, direction):
    """Copies framed messages from `source` to `sink`, recording each; ends with `source`."""
    while True:
        header = b""
        length = None
        while True:
            line = source.readline()
            if not line:
                sink.close()
                return
            header += line
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = source.read(length or 0)
        sink.write(header + body)
        sink.flush()
        record(direction, body)


server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
to_server = threading.Thread(target=pump, args=(sys.stdin.buffer, server.stdin, "to_server"), daemon=True)
to_server.start()
try:
    pump(server.stdout, sys.stdout.buffer, "from_server")
except BrokenPipeError:
    pass
sys.exit(server.wait())
