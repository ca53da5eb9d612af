/**
 * [SYNC5] A presence colour as it may reach other people's pages. Editors write it into style
 * attributes (y-codemirror.next: `style="border-color: ${color}"`, our text fields alike), so a
 * state relayed as the peer wrote it let anyone who may read a node, a Viewer too, put CSS of
 * her choice on everyone's page: a full-page overlay, or a `url()` that tells a server each
 * reader's address. Only plain colour values pass: `#rgb`…`#rrggbbaa`, a colour keyword, or
 * `rgb()` / `hsl()` with numbers.
 */
const SAFE_COLOR = /^(#[0-9a-fA-F]{3,8}|[a-zA-Z]{3,20}|(rgb|rgba|hsl|hsla)\([0-9.,%/ ]{1,60}\))$/

export function isSafeColor(value: unknown): value is string {
  return typeof value === 'string' && SAFE_COLOR.test(value)
}
