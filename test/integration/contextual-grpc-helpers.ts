import * as grpc from '@grpc/grpc-js'
import * as protoLoader from '@grpc/proto-loader'
import { PROTO_FILE } from '../../sync-server/contextual/index.js'

export type Obj = Record<string, unknown>
type Unary = (req: Obj, md: grpc.Metadata, cb: (err: grpc.ServiceError | null, res: Obj) => void) => grpc.ClientUnaryCall
export type ContextualStub = grpc.Client & Record<'next' | 'ack' | 'nack' | 'extend' | 'status' | 'react' | 'redrive' | 'deleteConsumer', Unary>

/** A stock @grpc/grpc-js client built from the repo's .proto, as any user would. */
export function stub(port: number): ContextualStub {
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO_FILE, { keepCase: false, longs: Number, defaults: true })) as unknown as {
    weft: { contextual: { v1: { Contextual: new (address: string, creds: grpc.ChannelCredentials) => ContextualStub } } }
  }
  return new pkg.weft.contextual.v1.Contextual(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
}

export function call(s: ContextualStub, method: keyof ContextualStub & string, req: Obj, token: string | null): Promise<{ ok: true; body: Obj } | { ok: false; code: grpc.status; weftCode: string | undefined; details: string }> {
  const md = new grpc.Metadata()
  if (token) md.set('authorization', `Bearer ${token}`)
  return new Promise((resolve) => {
    ;(s[method] as Unary).call(s, req, md, (err, res) => {
      if (err) resolve({ ok: false, code: err.code, weftCode: err.metadata?.get('weft-code')[0] as string | undefined, details: err.details })
      else resolve({ ok: true, body: res })
    })
  })
}

export async function ok(p: ReturnType<typeof call>): Promise<Obj> {
  const r = await p
  if (!r.ok) throw new Error(`grpc call failed: ${r.code} ${r.weftCode} ${r.details}`)
  return r.body
}
