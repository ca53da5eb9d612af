export { ObservableController } from './observable-controller.js'
