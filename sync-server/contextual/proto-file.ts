import { fileURLToPath } from 'node:url'

/** [CTX35] The contextual service's definition, read by the gRPC server and its clients at run time. */
export const PROTO_FILE = fileURLToPath(new URL('../../proto/weft/contextual/v1/contextual.proto', import.meta.url))
