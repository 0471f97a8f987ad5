# Runs untrusted, inside the sandbox, before anything else (`python -I -S -c <this> FD COMMAND...`): it
# tells cbr, on a pipe of its own, that the sandbox is up, closes the pipe, and becomes COMMAND. Whatever
# the command later prints, cbr then knows the sandbox started it: a script cannot pass its own failure
# off as the sandbox's (sandbox/run.py).
import os
import sys

fd = int(sys.argv[1])
os.write(fd, b"started")
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
