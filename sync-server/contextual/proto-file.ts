import { fileURLToPath } from 'node:url'

declare const WEFT_COMPILED: boolean | undefined

/**
 * [CTX35] The contextual service's definition, read by the gRPC server and its clients at run
 * time: from the checkout's `proto/`, or in the compiled server (sync-server/build.mjs) from the
 * copy the build puts beside the bundle, since a chunk's `../../proto` would point outside it.
 */
export const PROTO_FILE = fileURLToPath(
  typeof WEFT_COMPILED !== 'undefined' && WEFT_COMPILED
    ? new URL('./proto/weft/contextual/v1/contextual.proto', import.meta.url)
    : new URL('../../proto/weft/contextual/v1/contextual.proto', import.meta.url),
)
