import { SYSTEM, parseNodePath, type JsonObject, type NodePath } from '../../../shared/index.js'
import type { NodeApi } from '../../nodes/types.js'

/**
 * Built-in operations as Code templates (seed: "operations as scripts") at `Admin/Operations/*`,
 * which every signed-in user may read and execute ([ACT14], access-service.ts). Each run lands in
 * the caller's home (`{viewer}`) and its Mesh calls act as the caller: an export holds what they
 * can read, an import creates only what they may create (the rest is refused and listed).
 */
export const OPERATIONS_PATH = 'Admin/Operations'

const WALK = `
const nodes = [];
async function walk(path, depth) {
  Ct.throwIfAborted();
  const node = await Mesh.get(path);
  if (!node) return;
  nodes.push({ path: node.path, nodeType: node.nodeType, name: node.name, content: node.content, depth });
  Progress(Math.min(0.9, nodes.length / 1000), nodes.length + ' nodes');
  // Every child, a page at a time; engine state (_Activity runs, a Code node's _Check) is left
  // out: the engines rebuild it, and an import could not write it.
  for (let after; ;) {
    const page = await Mesh.query(after === undefined ? { parent: path, limit: 500 } : { parent: path, limit: 500, after });
    for (const child of page) {
      if (!child.path.slice(child.path.lastIndexOf('/') + 1).startsWith('_')) await walk(child.path, depth + 1);
    }
    if (page.length < 500) break;
    after = page[page.length - 1].path;
  }
}
await walk(Inputs.Root, 0);
`

const EXPORT_JSON = `${WALK}
const bundle = { Format: 'weft-bundle/1', Root: Inputs.Root, ExportedAt: new Date().toISOString(),
  Nodes: nodes.map(({ depth, ...n }) => n) };
const size = JSON.stringify(bundle).length;
Log.info('Exported ' + nodes.length + ' nodes from ' + Inputs.Root + ' (' + size + ' bytes of JSON).');
return bundle;
`

const EXPORT_MARKDOWN = `${WALK}
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
Log.info('Exported ' + nodes.length + ' nodes from ' + Inputs.Root + ' as Markdown (' + markdown.length + ' characters).');
return { Markdown: markdown, Bytes: markdown.length, Nodes: nodes.length };
`

const IMPORT_JSON = `
const bundle = typeof Inputs.Bundle === 'string' ? JSON.parse(Inputs.Bundle) : Inputs.Bundle;
if (!bundle || !Array.isArray(bundle.Nodes)) throw new Error('Bundle is not a weft bundle (no Nodes).');
const root = bundle.Root;
const base = root.includes('/') ? root.slice(0, root.lastIndexOf('/')) : '';
const target = String(Inputs.Target).replace(/\\/+$/, '');
const items = [...bundle.Nodes].sort((a, b) => a.path.split('/').length - b.path.split('/').length);
let imported = 0;
const refused = [];
for (let i = 0; i < items.length; i++) {
  Ct.throwIfAborted();
  const n = items[i];
  const rel = base ? n.path.slice(base.length + 1) : n.path;
  const path = target + '/' + rel;
  try {
    await Mesh.put(path, { nodeType: n.nodeType, name: n.name, content: n.content });
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

export const TEMPLATES: Record<string, JsonObject> = {
  ExportJson: {
    Language: 'javascript',
    IsExecutable: true,
    ActivityParentPath: '{viewer}',
    Description: 'Export a subtree as a JSON bundle (the output; size in the log).',
    Inputs: { Root: { Type: 'node', Label: 'Subtree to export', Required: true } },
    Source: EXPORT_JSON.trim(),
  },
  ExportMarkdown: {
    Language: 'javascript',
    IsExecutable: true,
    ActivityParentPath: '{viewer}',
    Description: 'Export a subtree as one Markdown document.',
    Inputs: { Root: { Type: 'node', Label: 'Subtree to export', Required: true } },
    Source: EXPORT_MARKDOWN.trim(),
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
    Source: IMPORT_JSON.trim(),
  },
}

/**
 * Seeds the templates (an edited one is left alone; a deleted one comes back on the next boot).
 * A template is shared by every user: its LastActivityPath would tell each of them who ran it
 * last, so a run of a template never sets it (nobody but its Admins may update it, [ACT1]) and one
 * an earlier build left is cleared here.
 */
export async function seedTemplates(nodes: NodeApi): Promise<void> {
  for (const [name, content] of Object.entries(TEMPLATES)) {
    const path = parseNodePath(`${OPERATIONS_PATH}/${name}`) as NodePath
    await nodes.update(
      SYSTEM,
      path,
      (cur) => {
        if (!cur) return { nodeType: 'Code', name, content }
        if (cur.content.LastActivityPath === undefined) return undefined
        const { LastActivityPath: _leaked, ...kept } = cur.content
        return { nodeType: cur.nodeType, name: cur.name, content: kept }
      },
      'engine',
    )
  }
}
