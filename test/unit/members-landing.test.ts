import { describe, expect, it } from 'vitest'
import { inviteLanding } from '../../web/components/members-panel.js'

/**
 * [WEB137] The members panel reads its list again while a grant has landed ahead of its invite's
 * Fired mark: an invite still waiting whose address is already a member's.
 */
describe('inviteLanding', () => {
  const invite = (email: string | null, status: string) => ({ email, status })
  it('is true for a waiting invite whose address is a member (any case)', () => {
    expect(inviteLanding([{ email: 'Cleo@Example.com' }], [invite('cleo@example.com', 'Pending')])).toBe(true)
  })
  it('is false once the invite is marked, or when nobody with its address is a member', () => {
    expect(inviteLanding([{ email: 'cleo@example.com' }], [invite('cleo@example.com', 'Fired')])).toBe(false)
    expect(inviteLanding([{ email: 'ann@example.com' }, { email: null }], [invite('cleo@example.com', 'Pending')])).toBe(false)
    expect(inviteLanding([{ email: null }], [invite(null, 'Pending')])).toBe(false)
    expect(inviteLanding([], [])).toBe(false)
  })
  it('ignores a cancelled or failed invite of a member (only a waiting one is on its way)', () => {
    expect(inviteLanding([{ email: 'cleo@example.com' }], [invite('cleo@example.com', 'Cancelled'), invite('cleo@example.com', 'Failed')])).toBe(false)
  })
})
