/**
 * Custom elements other features contribute to node pages (`<weft-members-panel>` on a Space,
 * `<weft-group-invite-dialog>` on a Group). The app entry imports this list only; each module
 * defines its element.
 */
import './members-panel.js'
import './group-invite-dialog.js'
import './code-page.js'
import './activity-panel.js'
import './activity-strip.js'
