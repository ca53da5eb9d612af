import type { JsonValue } from '../../shared/json.js'
import { fieldLabel } from './labels.js'
import { showToast } from './toast.js'

/**
 * [MOVE9] Removing a field is undoable: the field goes at once (everyone sees it go), and a toast
 * offers Undo, which writes the value back as it was when it was removed.
 */
export async function removeFieldWithUndo(key: string, value: JsonValue, patch: (key: string, value: JsonValue | null) => Promise<boolean>): Promise<void> {
  if (!(await patch(key, null))) return
  showToast(`Removed field “${fieldLabel(key)}”.`, { label: 'Undo', run: async () => void (await patch(key, value)) })
}
