export { HttpApi, HttpError, NetworkError, nextVersion, type AuthResult, type Capabilities, type ChangePage, type Me } from './http-client.js'
