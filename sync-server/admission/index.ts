export { admitUpdate } from './admit-update.js'
export type { Admission, AdmissionPolicy, AdmissionRefusalCode } from './admit-update.js'
export { ClientBindings, SERVER_DOC_CLIENT, type ClientBinding } from './client-bindings.js'
