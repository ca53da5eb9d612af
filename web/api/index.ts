export { HttpApi, HttpError, NetworkError, type AuthResult, type Me } from './http-client.js'
