/**
 * Where a script's error was thrown, in the lines the person wrote ([WEB25]): the worker evaluates
 * the wrapped source under its own file name, so its stack frames are told from the bootstrap's.
 */

/** The file name the script is evaluated under: its frames in a stack are told from the bootstrap's by it. */
export const SCRIPT_FILE = 'script.js'
/** The wrapper `compileScript` puts around the source adds one line above it. */
export const WRAPPER_LINES = 1

/**
 * Where in the script an error was thrown, from the first stack frame in the script's own file
 * (QuickJS writes `at fn (script.js:LINE:COLUMN)`, or `at script.js:LINE:COLUMN` for a syntax error),
 * as a line of the source the person wrote.
 * Null when the error came from elsewhere (the bootstrap, a host refusal) or has no stack.
 */
export function scriptLocation(stack: unknown, sourceLines: number): { line: number; column: number } | null {
  if (typeof stack !== 'string') return null
  // A frame in a function is `at fn (script.js:L:C)`; a syntax error's is `at script.js:L:C`.
  for (const m of stack.matchAll(/(?:\(|\bat )script\.js:(\d+):(\d+)/g)) {
    const line = Number(m[1]) - WRAPPER_LINES
    if (line >= 1 && line <= sourceLines) return { line, column: Number(m[2]) }
  }
  return null
}

