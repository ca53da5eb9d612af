import type { UserId } from '../../shared/index.js'

/** Read-only view of accounts for engines (e.g. "does a user with this email exist?"). */
export interface UserDirectory {
  findUserIdByEmail(email: string): Promise<UserId | null>
}
