"""Code that runs inside the sandbox, as untrusted code: cbr never imports these files. Each is read as
text (importlib.resources) and given to a sandboxed process, whole or appended to a script; each says so
in its header. Nothing here imports dsagent_cbr, which is not inside the sandbox."""
