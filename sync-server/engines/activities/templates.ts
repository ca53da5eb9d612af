import { SYSTEM, jsonEqual, parseNodePath, type JsonObject, type NodePath } from '../../../shared/index.js'
import { fieldRule, knownNodeTypes, nodeTypeDef } from '../../../shared/node-types.js'
import type { NodeApi } from '../../nodes/index.js'

/**
 * Built-in operations as Code templates (seed: "operations as scripts") at `Admin/Operations/*`,
 * which every signed-in user may read and execute ([ACT14], access-service.ts). Each run lands in
 * the caller's home (`{viewer}`) and its Mesh calls act as the caller: an export holds what they
 * can read, an import creates only what they may create (the rest is refused and listed).
 */
export const OPERATIONS_PATH = 'Admin/Operations'

/**
 * What an export leaves out and an import never writes, from the node types' field rules
 * (shared/node-types.ts), never a hand list: every field only `system` writes
 * (`fieldRule(type, field) === 'system'`: a Code node's LastActivityPath, a run's Status...), and
 * whole node types only `system` creates or writes (a User, a CodeCheck). Computed when the
 * templates are seeded, so types and rules registered at start-up count too.
 */
export function engineWritten(): { fields: Record<string, string[]>; types: string[] } {
  const fields: Record<string, string[]> = {}
  const types: string[] = []
  for (const type of knownNodeTypes()) {
    const d = nodeTypeDef(type)
    if (d.create === 'system' || d.defaultWrite === 'system') {
      types.push(type)
      continue
    }
    const sys = Object.keys(d.fields).filter((f) => fieldRule(type, f) === 'system')
    if (sys.length) fields[type] = sys
  }
  return { fields, types }
}

/**
 * Children that are engine state, rebuilt by the engines and not writable by an import: the
 * runs of a node (`_Activity`, history of what ran) and a Code node's syntax check (`_Check`).
 * Everything else under a node, its access (`_Access`) included, is exported.
 */
const ENGINE_STATE_SEGMENTS = ['_Activity', '_Check']

/** The engine-written table as script constants, and `writable(node)`: its content without them. */
const writableHelpers = () => {
  const { fields, types } = engineWritten()
  return `
const SYSTEM_FIELDS = ${JSON.stringify(fields)};
const ENGINE_TYPES = ${JSON.stringify(types)};
const ENGINE_STATE = ${JSON.stringify(ENGINE_STATE_SEGMENTS)};
function writable(nodeType, content) {
  const drop = SYSTEM_FIELDS[nodeType] || [];
  const out = {};
  for (const [k, v] of Object.entries(content || {})) if (!drop.includes(k)) out[k] = v;
  return out;
}
`
}

const WALK = () => `${writableHelpers()}
const nodes = [];
async function walk(path, depth) {
  Ct.throwIfAborted();
  const node = await Mesh.get(path);
  if (!node) return;
  // What only the engines write is left out: an import could not write it, and it would tell
  // whoever reads the bundle who ran what (a Code node's LastActivityPath).
  if (ENGINE_TYPES.includes(node.nodeType)) return;
  nodes.push({ path: node.path, nodeType: node.nodeType, name: node.name, content: writable(node.nodeType, node.content), depth });
  Progress(Math.min(0.9, nodes.length / 1000), nodes.length + ' nodes');
  // Every child, a page at a time; engine state (_Activity runs, a Code node's _Check) is left
  // out: the engines rebuild it, and an import could not write it. Access (_Access) comes along.
  for await (const child of children(path)) {
    if (!ENGINE_STATE.includes(child.path.slice(child.path.lastIndexOf('/') + 1))) await walk(child.path, depth + 1);
  }
  // Access assignments live under {path}/_Access, which is a place, not a node.
  for await (const a of children(path + '/_Access')) {
    nodes.push({ path: a.path, nodeType: a.nodeType, name: a.name, content: writable(a.nodeType, a.content), depth: depth + 2 });
  }
}
async function* children(parent) {
  for (let after; ;) {
    const page = await Mesh.query(after === undefined ? { parent, limit: 500 } : { parent, limit: 500, after });
    yield* page;
    if (page.length < 500) break;
    after = page[page.length - 1].path;
  }
}
await walk(Inputs.Root, 0);
// The last word on the bar agrees with the log's count (access assignments included).
Progress(1, nodes.length + ' nodes');
`

const EXPORT_JSON = () => `${WALK()}
const bundle = { Format: 'weft-bundle/1', Root: Inputs.Root, ExportedAt: new Date().toISOString(),
  Nodes: nodes.map(({ depth, ...n }) => n) };
// No size here: the result panel says the size of the file it downloads (one figure, not three).
Log.info('Exported ' + nodes.length + ' nodes from ' + Inputs.Root + '.');
return bundle;
`

const EXPORT_MARKDOWN = () => `${WALK()}
const lines = [];
for (const n of nodes) {
  lines.push('#'.repeat(Math.min(6, n.depth + 1)) + ' ' + n.name + '  ');
  lines.push('\`' + n.path + '\` (' + n.nodeType + ')', '');
  for (const [k, v] of Object.entries(n.content)) {
    lines.push(typeof v === 'string' && v.includes('\\n') ? '- **' + k + '**:\\n\\n' + v + '\\n' : '- **' + k + '**: ' + (typeof v === 'string' ? v : JSON.stringify(v)));
  }
  lines.push('');
}
const markdown = lines.join('\\n');
Log.info('Exported ' + nodes.length + ' nodes from ' + Inputs.Root + ' as Markdown.');
// Bytes as UTF-8, the size of the file the result panel downloads (not the count of characters).
let bytes = markdown.length;
try { bytes = encodeURIComponent(markdown).replace(/%[0-9A-F]{2}/g, '-').length; } catch (e) { /* a lone surrogate: characters */ }
return { Markdown: markdown, Bytes: bytes, Nodes: nodes.length };
`

const IMPORT_JSON = () => `${writableHelpers()}
const bundle = typeof Inputs.Bundle === 'string' ? JSON.parse(Inputs.Bundle) : Inputs.Bundle;
if (!bundle || !Array.isArray(bundle.Nodes)) throw new Error('Bundle is not a weft bundle (no Nodes).');
const root = bundle.Root;
const base = root.includes('/') ? root.slice(0, root.lastIndexOf('/')) : '';
const target = String(Inputs.Target).replace(/\\/+$/, '');
// A bundle from an older export may still carry nodes only the engines write: never sent.
const items = bundle.Nodes.filter((n) => !ENGINE_TYPES.includes(n.nodeType)).sort((a, b) => a.path.split('/').length - b.path.split('/').length);
if (items.length < bundle.Nodes.length) Log.info('Left out ' + (bundle.Nodes.length - items.length) + ' nodes only the server writes.');
let imported = 0;
const refused = [];
for (let i = 0; i < items.length; i++) {
  Ct.throwIfAborted();
  const n = items[i];
  const rel = base ? n.path.slice(base.length + 1) : n.path;
  const path = target + '/' + rel;
  try {
    await Mesh.put(path, { nodeType: n.nodeType, name: n.name, content: writable(n.nodeType, n.content) });
    imported++;
  } catch (e) {
    refused.push(path);
    Log.warn('Refused ' + path + ': ' + (e.code || e.message));
  }
  Progress((i + 1) / items.length, (i + 1) + ' of ' + items.length);
}
Log.info('Imported ' + imported + ' of ' + items.length + ' nodes into ' + target + '.');
return { Imported: imported, Refused: refused };
`

/** The templates' content, built now (the engine-written table reads the registered node types). */
export function templates(): Record<string, JsonObject> {
  return {
    ExportJson: {
      Language: 'javascript',
      IsExecutable: true,
      ActivityParentPath: '{viewer}',
      Description: 'Export a subtree as a JSON bundle, to download or to import elsewhere.',
      Inputs: { Root: { Type: 'node', Label: 'Subtree to export', Required: true, Requires: 'Export' } },
      Source: EXPORT_JSON().trim(),
    },
    ExportMarkdown: {
      Language: 'javascript',
      IsExecutable: true,
      ActivityParentPath: '{viewer}',
      Description: 'Export a subtree as one Markdown document.',
      Inputs: { Root: { Type: 'node', Label: 'Subtree to export', Required: true, Requires: 'Export' } },
      Source: EXPORT_MARKDOWN().trim(),
    },
    ImportJson: {
      Language: 'javascript',
      IsExecutable: true,
      ActivityParentPath: '{viewer}',
      Description: 'Import a JSON bundle under a node; what you may not create is refused and listed.',
      Inputs: {
        Bundle: { Type: 'json', Label: 'Bundle (the output of ExportJson)', Required: true },
        Target: { Type: 'node', Label: 'Import under', Required: true },
      },
      Source: IMPORT_JSON().trim(),
    },
  }
}

/**
 * Seeds the templates (an edited one is left alone; a deleted one comes back on the next boot).
 * A template is shared by every user: its LastActivityPath would tell each of them who ran it
 * last, so a run of a template never sets it (nobody but its Admins may update it, [ACT1]) and one
 * an earlier build left is cleared here.
 */
export async function seedTemplates(nodes: NodeApi): Promise<void> {
  for (const [name, content] of Object.entries(templates())) {
    const path = parseNodePath(`${OPERATIONS_PATH}/${name}`) as NodePath
    await nodes.update(
      SYSTEM,
      path,
      (cur) => {
        if (!cur) return { nodeType: 'Code', name, content }
        // A template this build's server seeded follows the build: an upgrade brings its fixes
        // (an export that leaves system fields out) and drops a LastActivityPath an earlier build
        // left. One an Admin made or changed under another name is left alone.
        if (cur.createdBy === 'system' && cur.nodeType === 'Code') {
          return jsonEqual(cur.content, content) ? undefined : { nodeType: 'Code', name: cur.name, content }
        }
        if (cur.content.LastActivityPath === undefined) return undefined
        const { LastActivityPath: _leaked, ...kept } = cur.content
        return { nodeType: cur.nodeType, name: cur.name, content: kept }
      },
      'engine',
    )
  }
}
