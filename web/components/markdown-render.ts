import MarkdownIt from 'markdown-it'

/**
 * Markdown to HTML for the preview of a long-text field. What people type is never HTML:
 * `html: false` makes markdown-it escape every tag (`<img onerror=…>` reads as text), and links
 * and images are kept only with a scheme on the allow-list below (markdown-it's own check
 * refuses `javascript:` and friends; this one refuses every scheme it does not name).
 */
const md = new MarkdownIt({ html: false, linkify: true, typographer: false })

/** Schemes a link or image may use; a URL with no scheme (relative, `#anchor`) is kept. */
const SAFE_SCHEME = /^(https?|mailto):/i
const ANY_SCHEME = /^[a-z][a-z0-9+.-]*:/i

md.validateLink = (url: string): boolean => {
  // What the browser would see: control characters and spaces are dropped from a scheme.
  // eslint-disable-next-line no-control-regex
  const bare = url.replace(/[\u0000-\u0020\u007f-\u009f]/g, '')
  return SAFE_SCHEME.test(bare) || !ANY_SCHEME.test(bare)
}

// Links open beside the app, and tell the target nothing about it.
const defaultLinkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options))
md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
  const token = tokens[idx]!
  token.attrSet('target', '_blank')
  token.attrSet('rel', 'noopener noreferrer nofollow')
  return defaultLinkOpen(tokens, idx, options, env, self)
}

/** The preview's HTML: safe to put in the page as it is (nothing the author typed is markup). */
export function renderMarkdown(source: string): string {
  return md.render(source)
}
