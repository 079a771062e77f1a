/**
 * The instruction files in force for a session (`instructions` of the `session/new` or
 * `session/load` result), as the line the panel shows when the session opens.
 */
import * as path from "node:path";
import type { InstructionFileInfo } from "./protocol.generated";

/** `Instructions in force: AGENTS.md, src/CLAUDE.md (cut to fit the cap).`; undefined: none. */
export function instructionsNotice(files: InstructionFileInfo[] | undefined, workspace: string): string | undefined {
  if (!files?.length) return undefined;
  const shown = files.map((file) => {
    const relative = path.relative(workspace, file.path);
    const name = relative && !relative.startsWith("..") && !path.isAbsolute(relative) ? relative : file.path;
    return name + (file.truncated ? " (cut to fit the cap)" : "");
  });
  return `Instructions in force: ${shown.join(", ")}.`;
}
