#!/usr/bin/env python3
"""A tiny coding-agent-like TUI for KARL's injection tests.

Raw tty, bracketed paste on, an input box at the bottom. Enter outside a paste submits the
box; each submission is logged as one JSON line {"prompt": TEXT}; each paste as
{"paste": N}. --drop-enters N ignores the first N Enters (a lost Enter).
"""
import json, os, sys, termios, tty

args = sys.argv[1:]
log_path = args[args.index("--log") + 1]
drop = int(args[args.index("--drop-enters") + 1]) if "--drop-enters" in args else 0

fd = sys.stdin.fileno()
tty.setraw(fd)
out = sys.stdout


def log(obj):
    with open(log_path, "a", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        f.flush()


box = bytearray()
submitted = 0
dropped = 0


def draw():
    shown = box.decode("utf-8", "replace").replace("\n", "⏎").replace("\t", "→")
    out.write("\x1b[2J\x1b[H")
    out.write("stand-in tui · submitted %d\r\n" % submitted)
    out.write("────────────────\r\n")
    out.write("> " + shown + "\r\n")
    out.write("────────────────\r\n")
    out.flush()


out.write("\x1b[?2004h")
draw()
pending = b""
in_paste = False
paste = bytearray()
while True:
    data = os.read(fd, 65536)
    if not data:
        break
    pending += data
    while pending:
        if in_paste:
            end = pending.find(b"\x1b[201~")
            if end < 0:
                # The end marker always follows; keep a possible partial one for later.
                if len(pending) > 5:
                    paste += pending[:-5]
                    pending = pending[-5:]
                break
            paste += pending[:end]
            pending = pending[end + 6:]
            in_paste = False
            box += paste
            log({"paste": len(paste)})
            paste = bytearray()
            draw()
            continue
        if pending.startswith(b"\x1b[200~"):
            pending = pending[6:]
            in_paste = True
            continue
        if pending.startswith(b"\x1b") and len(pending) < 6 and b"\x1b[200~".startswith(pending):
            break  # partial start marker
        c = pending[:1]
        pending = pending[1:]
        if c == b"\r":
            if dropped < drop:
                dropped += 1
                continue
            if box:
                log({"prompt": box.decode("utf-8", "replace")})
                submitted += 1
                box = bytearray()
            draw()
        elif c == b"\x03":
            out.write("\x1b[?2004l")
            out.flush()
            sys.exit(0)
        elif c == b"\x7f":
            if box:
                box = box[:-1]
            draw()
        elif c == b"\x1b":
            pass
        else:
            box += c
            draw()
