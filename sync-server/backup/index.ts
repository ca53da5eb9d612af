export { takeBackup, type BackupResult, type Progress } from './backup.js'
export { restoreBackup, DatabaseInUse, type RestoreResult } from './restore.js'
export { verifyBackup, InvalidBackup, BackupHeader, HEADER_BYTES, FORMAT_VERSION } from './format.js'
export { describeLocation, type Location } from './exec.js'
