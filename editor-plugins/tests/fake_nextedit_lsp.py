"""A scripted stdio language server for the editor tests of next edits: it answers
`textDocument/copilotInlineEdit` with the edit a script file holds (re-read on every request),
lists one accept command in `executeCommandProvider`, answers `textDocument/inlineCompletion`
from the script too, and records every message it gets (and every answer it sends) as one JSON
line in a log, so a test can check what the editor sent: the request's version and position,
`didShowInlineEdit`, `workspace/executeCommand`.

    python fake_nextedit_lsp.py --script SCRIPT.json --log LOG.jsonl [lsp]

The script (JSON; a missing file means the defaults):
    edits           list of {range, text}: the answer's edits, each given the request's
                    textDocument (uri, version + version_offset) and the accept command with
                    arguments [id], id counting up from 1
    delay_ms        how long to wait before answering a next-edit request (other messages are
                    read meanwhile)
    version_offset  added to the request's version in the answer (-1: a stale answer)
    command         the accept command's name (default "fake.acceptNextEdit")
    inline          inline-completion items to answer with (default none)
    inline_delay_ms how long to wait before answering an inline-completion request (other
                    messages are read meanwhile)
    unknown_method  true: answer copilotInlineEdit with MethodNotFound, as a server without it

Standard library only: it runs under whatever Python runs the tests.
"""

import argparse
import json
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--script", required=True)
parser.add_argument("--log", required=True)
args, _ = parser.parse_known_args()

out_lock = threading.Lock()
log_lock = threading.Lock()
next_id = 0


def record(entry):
    with log_lock, open(args.log, "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def script():
    try:
        with open(args.script, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def send(message):
    body = json.dumps(message).encode("utf-8")
    with out_lock:
        sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sys.stdout.buffer.flush()


def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))


def inline_edit(params, reply):
    global next_id
    current = script()
    time.sleep(current.get("delay_ms", 0) / 1000)
    if current.get("unknown_method"):
        reply(error={"code": -32601, "message": "method not found: textDocument/copilotInlineEdit"})
        return
    document = params["textDocument"]
    edits = []
    for edit in current.get("edits", []):
        next_id += 1
        edits.append(
            {
                "text": edit["text"],
                "textDocument": {"uri": document["uri"], "version": document["version"] + current.get("version_offset", 0)},
                "range": edit["range"],
                "command": {
                    "title": "Accept next edit",
                    "command": current.get("command", "fake.acceptNextEdit"),
                    "arguments": [str(next_id)],
                },
            }
        )
    reply(result={"edits": edits})


def inline_completion(reply):
    current = script()
    time.sleep(current.get("inline_delay_ms", 0) / 1000)
    reply(result={"items": current.get("inline", [])})


def main():
    command = script().get("command", "fake.acceptNextEdit")
    while True:
        message = read()
        if message is None:
            return
        record({"received": message})
        method, params, mid = message.get("method"), message.get("params"), message.get("id")

        def reply(result=None, error=None, mid=mid, method=method):
            response = {"jsonrpc": "2.0", "id": mid}
            if error is not None:
                response["error"] = error
            else:
                response["result"] = result
            send(response)
            record({"sent": method, "id": mid, "response": response})

        if mid is None or method is None:
            if method == "exit":
                return
            continue  # notifications, and answers to our (no) requests
        if method == "initialize":
            reply(
                result={
                    "capabilities": {
                        "positionEncoding": "utf-16",
                        "textDocumentSync": {"openClose": True, "change": 1},
                        "inlineCompletionProvider": True,
                        "executeCommandProvider": {"commands": [command]},
                    },
                    "serverInfo": {"name": "fake-nextedit", "version": "0"},
                }
            )
        elif method == "shutdown":
            reply(result=None)
        elif method == "textDocument/copilotInlineEdit":
            threading.Thread(target=inline_edit, args=(params, reply), daemon=True).start()
        elif method == "textDocument/inlineCompletion":
            threading.Thread(target=inline_completion, args=(reply,), daemon=True).start()
        elif method == "workspace/executeCommand":
            reply(result=None)
        else:
            reply(error={"code": -32601, "message": f"method not found: {method}"})


main()
