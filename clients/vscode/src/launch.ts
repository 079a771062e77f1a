/**
 * How the daemon is started, from the values of the `heddle.server.*` settings. It imports
 * nothing of vscode, so the Node tests start the daemon exactly this way.
 */

export interface DaemonLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/**
 * `python -I -m heddle serve` when a Python is given, else `<command> serve`. The daemon runs
 * in the workspace folder, and `python -m` would put that folder first on the import path, so
 * a project's `json.py` or `heddle/` would be imported by the daemon: `-I` leaves it out (and
 * PYTHON* variables and the user's site-packages). A console script never has it on the path.
 */
export function launchFor(pythonPath: string, command: string, env: Record<string, string>): DaemonLaunch {
  if (pythonPath) return { command: pythonPath, args: ["-I", "-m", "heddle", "serve"], env };
  return { command: command || "heddle", args: ["serve"], env };
}
