export { AccessService, assignmentLabel, assignmentScope, deniedEnded, ACCESS_SEGMENT } from './access-service.js'
