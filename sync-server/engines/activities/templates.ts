import type { NodeApi } from '../../nodes/types.js'

/** Built-in operations as Code templates (seeded once; an edited template is left alone). */
export async function seedTemplates(nodes: NodeApi): Promise<void> {
  void nodes
}
