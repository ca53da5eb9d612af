// [PROD3] `node --import test/helpers/package-log.mjs <entry>` with WEFT_PACKAGE_LOG=<file>: every
// package the process loads (ESM import or CommonJS require, by name) is appended to <file>, one
// a line, as it is first resolved. Plain JavaScript: it runs before any loader, beside a compiled
// server. Tests read the file to see what a start loaded and what waited for first use.
import { appendFileSync } from 'node:fs'
import process from 'node:process'
import Module, { register } from 'node:module'
import { isMainThread } from 'node:worker_threads'

const file = process.env.WEFT_PACKAGE_LOG
const seen = new Set()
const note = (specifier) => {
  if (!file || /^(node:|\.|\/|file:)/.test(specifier)) return
  const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]
  if (Module.isBuiltin(name) || seen.has(name)) return
  seen.add(name)
  appendFileSync(file, `${name}\n`)
}

/** The ESM resolve hook (runs on the loader's thread). */
export async function resolve(specifier, context, next) {
  note(specifier)
  return next(specifier, context)
}

// On the main thread only: the hooks themselves load on the loader's thread (not the main one).
if (isMainThread) {
  register(import.meta.url)
  const load = Module._load
  Module._load = function (request, ...rest) {
    note(request)
    return load.call(this, request, ...rest)
  }
}
