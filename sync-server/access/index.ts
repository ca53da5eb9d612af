export { AccessService, assignmentLabel, assignmentScope, ACCESS_SEGMENT } from './access-service.js'
